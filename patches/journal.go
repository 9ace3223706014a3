package patches

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/smpatch/smpatch/source"
)

// The journal (DESIGN.md, "Journal and safety") lives in the tree's state
// directory:
//
//	.smpatch/state.json           applied patches; entries in flight are "pending" or "reverting"
//	.smpatch/orig/NAME/PATH       original bytes of every file a patch changed
//	.smpatch/patched/NAME/PATH    the bytes the patch wrote (to show drift, and to reverse-apply)
//	.smpatch/target/NAME/PATH     bytes a forced revert writes
//	.smpatch/lock                 gofrs/flock; held by every command that reads or writes state
//
// Apply records a pending entry with the originals first, then writes each
// file (temp + fsync + rename), then marks the entry applied. Any command
// that finds an entry in flight first finishes it the safe way: a pending
// apply is rolled back, an interrupted revert is completed.

// stateFormat is the version of state.json's layout.
const stateFormat = 1

// EntryState is where a journal entry stands.
type EntryState string

const (
	StatePending   EntryState = "pending"   // apply in flight: roll back
	StateApplied   EntryState = "applied"   // done
	StateReverting EntryState = "reverting" // revert in flight: finish
)

// State is the content of state.json.
type State struct {
	Format  int      `json:"format"`
	Tree    string   `json:"tree"`
	Kind    string   `json:"kind"`
	Patches []*Entry `json:"patches"`
	// Recovered says what was rolled back or finished before this state was
	// read (not stored).
	Recovered []string `json:"-"`
}

// Entry is one applied patch.
type Entry struct {
	Name          string        `json:"name"`
	Project       string        `json:"project"`
	State         EntryState    `json:"state"`
	Variant       string        `json:"variant"`
	VariantReason string        `json:"variant_reason,omitempty"`
	Version       string        `json:"version,omitempty"`
	VersionFrom   string        `json:"version_from,omitempty"`
	Origin        string        `json:"origin"`
	PatchDigest   string        `json:"patch_digest"`
	CatalogDigest string        `json:"catalog_digest,omitempty"`
	ToolVersion   string        `json:"tool_version"`
	AppliedAt     time.Time     `json:"applied_at"`
	Notes         []string      `json:"notes,omitempty"`
	Files         []*FileRecord `json:"files"`
}

// FileRecord is one file an entry changed.
type FileRecord struct {
	Path     string `json:"path"`                      // repository-relative
	Original string `json:"original_sha256,omitempty"` // "" when the patch created the file
	Patched  string `json:"patched_sha256,omitempty"`  // "" when the patch deleted it
}

// Get returns the entry called name, or nil.
func (s *State) Get(name string) *Entry {
	for _, e := range s.Patches {
		if e.Name == name {
			return e
		}
	}
	return nil
}

func (s *State) remove(name string) {
	out := s.Patches[:0]
	for _, e := range s.Patches {
		if e.Name != name {
			out = append(out, e)
		}
	}
	s.Patches = out
}

func sha256Hex(b []byte) string {
	if b == nil {
		return ""
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// testHook, when set by tests, is called at each step of a write; an error
// it returns is treated as the process dying there when it is errCrash.
var testHook func(step string) error

// errCrash makes a write stop where it is, without any clean-up, as if the
// process had been killed.
var errCrash = errors.New("simulated crash")

func hook(step string) error {
	if testHook == nil {
		return nil
	}
	return testHook(step)
}

// journal is an open, locked state directory.
type journal struct {
	t     source.WritableTree
	dir   string
	lock  *flock.Flock
	state *State
}

// diskPather is implemented by trees on disk: it maps a repository-relative
// path to the file's absolute path, refusing paths that leave the tree.
type diskPather interface {
	AbsPath(rel string) (string, error)
}

func diskPath(t source.WritableTree, rel string) (string, error) {
	if d, ok := t.(diskPather); ok {
		return d.AbsPath(rel)
	}
	return "", fmt.Errorf("%s: tree is not on disk", rel)
}

// openJournal creates the state directory if needed and takes the lock,
// waiting for another smpatch until ctx ends.
func openJournal(ctx context.Context, t source.WritableTree) (*journal, error) {
	dir := t.StateDir()
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := checkDirWritable(filepath.Dir(dir)); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		if t.Kind() == source.KindCheckout {
			if err := addGitExclude(t.Root()); err != nil {
				return nil, fmt.Errorf("journal: .git/info/exclude: %w", err)
			}
		}
	}
	lockPath := filepath.Join(dir, "lock")
	for {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("journal: %w", err)
		}
		l := flock.New(lockPath)
		ok, err := l.TryLockContext(ctx, 20*time.Millisecond)
		if err != nil {
			return nil, fmt.Errorf("journal lock %s: %w", lockPath, err)
		}
		if !ok {
			return nil, fmt.Errorf("journal lock %s: not acquired", lockPath)
		}
		// The holder before us may have removed the state directory (a
		// revert that left nothing applied): the lock we hold is then on a
		// file nobody else can see. Take it again on the current file.
		held, err1 := l.Stat()
		cur, err2 := os.Stat(lockPath)
		if err1 == nil && err2 == nil && os.SameFile(held, cur) {
			j := &journal{t: t, dir: dir, lock: l}
			if err := j.load(); err != nil {
				_ = l.Unlock()
				return nil, err
			}
			return j, nil
		}
		_ = l.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// close saves nothing; it releases the lock, removing the state directory
// first when nothing is applied any more.
func (j *journal) close() {
	if j.state != nil && len(j.state.Patches) == 0 {
		// Everything in it is ours, temporary files of killed writes included.
		_ = os.RemoveAll(j.dir)
	}
	_ = j.lock.Unlock()
}

func (j *journal) statePath() string { return filepath.Join(j.dir, "state.json") }

func (j *journal) load() error {
	data, err := os.ReadFile(j.statePath())
	if errors.Is(err, fs.ErrNotExist) {
		j.state = &State{Format: stateFormat, Tree: j.t.Root(), Kind: string(j.t.Kind())}
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("%s: %v", j.statePath(), err)
	}
	if s.Format > stateFormat {
		return fmt.Errorf("%s: written by a newer smpatch (format %d)", j.statePath(), s.Format)
	}
	// Names and paths become file names under the journal and the tree:
	// refuse anything that could lead elsewhere.
	for _, e := range s.Patches {
		if e == nil || !patchNameRE.MatchString(e.Name) {
			return fmt.Errorf("%s: damaged: bad patch name in an entry", j.statePath())
		}
		for _, f := range e.Files {
			if f == nil {
				return fmt.Errorf("%s: damaged: empty file record in %s", j.statePath(), e.Name)
			}
			if _, err := source.CleanRel(f.Path); err != nil {
				return fmt.Errorf("%s: damaged: entry %s: %v", j.statePath(), e.Name, err)
			}
		}
	}
	j.state = &s
	return nil
}

func (j *journal) save() error {
	data, err := json.MarshalIndent(j.state, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	return source.WriteFileAtomic(j.statePath(), data, 0o644)
}

func (j *journal) blob(kind, name, rel string) string {
	return filepath.Join(j.dir, kind, name, filepath.FromSlash(rel))
}

func (j *journal) writeBlob(kind, name, rel string, data []byte, durable bool) error {
	p := j.blob(kind, name, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if durable {
		return source.WriteFileAtomic(p, data, 0o644)
	}
	return os.WriteFile(p, data, 0o644)
}

// readBlob reads a journal copy; a missing copy is (nil, nil) when ok to miss.
func (j *journal) readBlob(kind, name, rel string) ([]byte, error) {
	return os.ReadFile(j.blob(kind, name, rel))
}

func (j *journal) dropBlobs(name string) {
	for _, d := range []string{"orig", "patched", "target"} {
		_ = os.RemoveAll(filepath.Join(j.dir, d, name))
	}
}

// readCurrent reads a tree file; a missing file is nil.
func readCurrent(t source.Tree, rel string) ([]byte, error) {
	b, err := t.ReadFile(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if b == nil && err == nil {
		b = []byte{}
	}
	return b, err
}

// recover finishes every entry in flight: a pending apply is rolled back to
// the originals, an interrupted revert is completed. It returns one line per
// entry for the user.
func (j *journal) recover() ([]string, error) {
	var notes []string
	for _, e := range append([]*Entry(nil), j.state.Patches...) {
		switch e.State {
		case StateApplied:
			continue
		case StatePending:
			if err := j.restore(e, false); err != nil {
				return notes, fmt.Errorf("rolling back the interrupted apply of %s: %w", e.Name, err)
			}
			notes = append(notes, fmt.Sprintf("rolled back an interrupted apply of %s (%d files restored to their originals)", e.Name, len(e.Files)))
		case StateReverting:
			if err := j.restore(e, true); err != nil {
				return notes, fmt.Errorf("finishing the interrupted revert of %s: %w", e.Name, err)
			}
			notes = append(notes, fmt.Sprintf("finished an interrupted revert of %s", e.Name))
		default:
			return notes, fmt.Errorf("%s: entry %s has unknown state %q", j.statePath(), e.Name, e.State)
		}
		j.state.remove(e.Name)
		if err := j.save(); err != nil {
			return notes, err
		}
		j.dropBlobs(e.Name)
	}
	j.dropOrphans()
	j.state.Recovered = notes
	return notes, nil
}

// dropOrphans removes journal copies of entries that were never recorded
// (a crash before the pending entry was saved wrote no tree file).
func (j *journal) dropOrphans() {
	for _, d := range []string{"orig", "patched", "target"} {
		ents, err := os.ReadDir(filepath.Join(j.dir, d))
		if err != nil {
			continue
		}
		for _, de := range ents {
			if j.state.Get(de.Name()) == nil {
				_ = os.RemoveAll(filepath.Join(j.dir, d, de.Name()))
			}
		}
	}
}

// restore writes back, for every file of e, the original bytes (or, when
// forced is set and a forced-revert target was recorded, that target).
func (j *journal) restore(e *Entry, useTarget bool) error {
	files := map[string][]byte{}
	var order []string
	for _, f := range e.Files {
		want, err := j.wanted(e, f, useTarget)
		if err != nil {
			return err
		}
		cur, err := readCurrent(j.t, f.Path)
		if err != nil {
			return err
		}
		cleanTemps(j.t, f.Path)
		if sha256Hex(cur) == sha256Hex(want) && (cur == nil) == (want == nil) {
			continue
		}
		files[f.Path] = want
		order = append(order, f.Path)
	}
	for _, p := range order {
		if err := j.t.WriteFiles(map[string][]byte{p: files[p]}); err != nil {
			return err
		}
		removePyc(j.t, p)
	}
	return nil
}

// wanted is the bytes a file of e must have after rolling back (originals)
// or after a revert (target when recorded, else originals).
func (j *journal) wanted(e *Entry, f *FileRecord, useTarget bool) ([]byte, error) {
	if useTarget {
		b, err := j.readBlob("target", e.Name, f.Path)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if _, err := os.Stat(j.blob("target", e.Name, f.Path) + ".deleted"); err == nil {
			return nil, nil
		}
	}
	if f.Original == "" {
		return nil, nil // the patch created it
	}
	b, err := j.readBlob("orig", e.Name, f.Path)
	if err != nil {
		return nil, fmt.Errorf("journal copy of %s: %w", f.Path, err)
	}
	if sha256Hex(b) != f.Original {
		return nil, fmt.Errorf("journal copy of %s is damaged (sha256 %s, expected %s)", f.Path, sha256Hex(b)[:12], f.Original[:12])
	}
	return b, nil
}

// cleanTemps removes temporary files a killed write left beside rel
// (renameio names them ".BASE" followed by digits).
func cleanTemps(t source.WritableTree, rel string) {
	p, err := diskPath(t, rel)
	if err != nil {
		return
	}
	dir, base := filepath.Dir(p), filepath.Base(p)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	re := regexp.MustCompile(`^\.` + regexp.QuoteMeta(base) + `[0-9]+$`)
	for _, de := range ents {
		if de.Type().IsRegular() && re.MatchString(de.Name()) {
			_ = os.Remove(filepath.Join(dir, de.Name()))
		}
	}
}

// removePyc removes the cached bytecode of a .py file: CPython's
// unchecked-hash pycs would otherwise keep running the old source.
func removePyc(t source.WritableTree, rel string) []string {
	if !strings.HasSuffix(rel, ".py") {
		return nil
	}
	p, err := diskPath(t, rel)
	if err != nil {
		return nil
	}
	stem := strings.TrimSuffix(filepath.Base(p), ".py")
	cache := filepath.Join(filepath.Dir(p), "__pycache__")
	ents, err := os.ReadDir(cache)
	if err != nil {
		return nil
	}
	var removed []string
	for _, de := range ents {
		n := de.Name()
		if strings.HasPrefix(n, stem+".") && strings.HasSuffix(n, ".pyc") && !strings.Contains(n[len(stem)+1:len(n)-4], "/") {
			// stem.TAG.pyc or stem.TAG.opt-N.pyc, never another module's
			mid := n[len(stem)+1 : len(n)-4]
			if mid == "" {
				continue
			}
			if err := os.Remove(filepath.Join(cache, n)); err == nil {
				removed = append(removed, filepath.ToSlash(filepath.Join(filepath.Dir(rel), "__pycache__", n)))
			}
		}
	}
	sort.Strings(removed)
	return removed
}

// checkWritable fails when a file that would be written, or its directory,
// is read-only. Permission bits are honoured even for root: a file marked
// read-only is not ours to change.
func checkWritable(t source.WritableTree, rels []string) error {
	for _, rel := range rels {
		p, err := diskPath(t, rel)
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		switch {
		case err == nil:
			if !st.Mode().IsRegular() {
				return fmt.Errorf("%s: not a regular file", p)
			}
			if st.Mode().Perm()&0o200 == 0 || syscall.Access(p, 2) != nil {
				return fmt.Errorf("%s: file is read-only (mode %04o)", p, st.Mode().Perm())
			}
		case errors.Is(err, fs.ErrNotExist):
		default:
			return err
		}
		dir := filepath.Dir(p)
		for {
			if _, err := os.Stat(dir); err == nil {
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
		if err := checkDirWritable(dir); err != nil {
			return err
		}
	}
	return nil
}

func checkDirWritable(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o200 == 0 || syscall.Access(dir, 2|1) != nil {
		return fmt.Errorf("%s: directory is read-only (mode %04o)", dir, st.Mode().Perm())
	}
	return nil
}

// addGitExclude adds the journal directory to .git/info/exclude of the
// repository whose top level is root.
func addGitExclude(root string) error {
	gitPath := filepath.Join(root, ".git")
	st, err := os.Stat(gitPath)
	if err != nil {
		return nil // not a git top level
	}
	gitDir := gitPath
	if !st.IsDir() {
		data, err := os.ReadFile(gitPath)
		if err != nil {
			return err
		}
		d, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
		if !ok {
			return nil
		}
		gitDir = strings.TrimSpace(d)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(root, gitDir)
		}
		if c, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
			common := strings.TrimSpace(string(c))
			if !filepath.IsAbs(common) {
				common = filepath.Join(gitDir, common)
			}
			gitDir = common
		}
	}
	excl := filepath.Join(gitDir, "info", "exclude")
	data, err := os.ReadFile(excl)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	line := "/" + source.StateDirName + "/"
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == line || l == source.StateDirName+"/" || l == source.StateDirName || l == "/"+source.StateDirName {
			return nil
		}
	}
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	data = append(data, []byte("# smpatch journal\n"+line+"\n")...)
	if err := os.MkdirAll(filepath.Dir(excl), 0o755); err != nil {
		return err
	}
	return source.WriteFileAtomic(excl, data, 0o644)
}

// ReadState returns the journal of t, after finishing any entry left in
// flight (State.Recovered says what was done). A tree without a journal has
// an empty state and is not touched.
func ReadState(ctx context.Context, t source.WritableTree) (*State, error) {
	if _, err := os.Stat(filepath.Join(t.StateDir(), "state.json")); errors.Is(err, fs.ErrNotExist) {
		return &State{Format: stateFormat, Tree: t.Root(), Kind: string(t.Kind())}, nil
	}
	j, err := openJournal(ctx, t)
	if err != nil {
		return nil, err
	}
	defer j.close()
	if _, err := j.recover(); err != nil {
		return nil, err
	}
	return j.state, nil
}

// Recover finishes any journal entry left in flight on t and returns what it
// did, one line each. Commands call it before planning, so that a plan never
// sees a half-written tree.
func Recover(ctx context.Context, t source.WritableTree) ([]string, error) {
	s, err := ReadState(ctx, t)
	if err != nil {
		return nil, err
	}
	return s.Recovered, nil
}

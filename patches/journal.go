package patches

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/smpatch/smpatch/source"
)

// The journal lives in the tree's state
// directory:
//
//	.smpatch/state.json           applied patches; entries in flight are "pending" or "reverting"
//	.smpatch/NAME.orig.tar        original bytes of every file a patch changed, each at PATH
//	.smpatch/NAME.patched.tar     the bytes the patch wrote (to show drift, and to reverse-apply)
//	.smpatch/NAME.target.tar      bytes a forced revert writes
//	.smpatch/lock                 gofrs/flock; held by every command that reads or writes state
//
// (Earlier journals kept KIND/NAME.tar, and before that KIND/NAME/PATH;
// they are still read.) Apply records a pending entry with the originals first, then
// writes each file (temp + fsync + rename), then marks the entry applied.
// The syncs of each step are done together (source.SyncAll). Any command
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
	// CreatedDirs are the directories (repository-relative) apply made
	// for the files the patch created, deepest first: a revert or a
	// rollback removes those that are empty again.
	CreatedDirs []string `json:"created_dirs,omitempty"`
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
	// created is set when this command made the state directory: its entry
	// in the tree root is synced with the first durable write.
	created bool
	// blobCache holds the journal copies read, by "KIND/NAME".
	blobCache map[string]map[string][]byte
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
	created := false
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		created = true
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
			j := &journal{t: t, dir: dir, lock: l, created: created}
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
		if e == nil || !patchNameRE().MatchString(e.Name) {
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
		for _, d := range e.CreatedDirs {
			if _, err := source.CleanRel(d); err != nil || !dirOfAny(d, e.Files) {
				return fmt.Errorf("%s: damaged: entry %s: created directory %q is not above one of its files", j.statePath(), e.Name, d)
			}
		}
	}
	j.state = &s
	return nil
}

// save writes state.json durably: temporary file, sync, rename, sync of
// the state directory.
func (j *journal) save() error {
	st, err := j.stageState()
	if err != nil {
		return err
	}
	if err := source.SyncAll([]*os.File{st.f}, nil); err != nil {
		st.discard()
		return err
	}
	if err := st.commit(); err != nil {
		return err
	}
	return source.SyncDir(j.dir)
}

// stagedState is state.json written to a temporary file beside it, not yet
// in place: sync st.f (with other files, source.SyncAll), then commit, then
// sync the state directory.
type stagedState struct {
	f    *os.File
	path string
}

// stageState writes the current state to a temporary file.
func (j *journal) stageState() (*stagedState, error) {
	data, err := json.MarshalIndent(j.state, "", "  ")
	if err != nil {
		return nil, err
	}
	data = append(data, '\n')
	f, err := source.WriteTemp(j.statePath(), data)
	if err != nil {
		return nil, err
	}
	return &stagedState{f: f, path: j.statePath()}, nil
}

// commit renames the synced temporary file over state.json.
func (st *stagedState) commit() error {
	if err := st.f.Close(); err != nil {
		_ = os.Remove(st.f.Name())
		return err
	}
	if err := os.Rename(st.f.Name(), st.path); err != nil {
		_ = os.Remove(st.f.Name())
		return err
	}
	return nil
}

// discard removes the temporary file.
func (st *stagedState) discard() {
	_ = st.f.Close()
	_ = os.Remove(st.f.Name())
}

// Journal copies. Every copy of one kind ("orig", "patched", "target") for
// one entry is one tar file in the state directory, NAME.KIND.tar, holding
// each file under its repository path (a forced revert that removes a file
// records an empty PATH.deleted). One file per kind, beside state.json,
// keeps an apply to a few creations and syncs however deep the patched
// paths are, and `tar -x` recovers the originals by hand. Earlier journals
// kept KIND/NAME.tar, and before that one file per copy, KIND/NAME/PATH:
// both are still read and dropped.

var blobKinds = []string{"orig", "patched", "target"}

func (j *journal) blobTar(kind, name string) string {
	return filepath.Join(j.dir, name+"."+kind+".tar")
}

// blobTarOld is where journals kept a kind's tar file before it moved
// beside state.json.
func (j *journal) blobTarOld(kind, name string) string {
	return filepath.Join(j.dir, kind, name+".tar")
}

// blobLegacy is where journals before the tar files kept a copy.
func (j *journal) blobLegacy(kind, name, rel string) string {
	return filepath.Join(j.dir, kind, name, filepath.FromSlash(rel))
}

// blobSet reads (once) the tar file of one kind and entry: path → bytes;
// nil without error when there is none.
func (j *journal) blobSet(kind, name string) (map[string][]byte, error) {
	key := kind + "/" + name
	if set, ok := j.blobCache[key]; ok {
		return set, nil
	}
	p := j.blobTar(kind, name)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		p = j.blobTarOld(kind, name)
		f, err = os.Open(p)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	set := map[string][]byte{}
	tr := tar.NewReader(bufio.NewReaderSize(f, 64<<10))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b := make([]byte, h.Size)
		if _, err := io.ReadFull(tr, b); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p, h.Name, err)
		}
		set[h.Name] = b
	}
	if j.blobCache == nil {
		j.blobCache = map[string]map[string][]byte{}
	}
	j.blobCache[key] = set
	return set, nil
}

// readBlob reads a journal copy; a missing one is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func (j *journal) readBlob(kind, name, rel string) ([]byte, error) {
	set, err := j.blobSet(kind, name)
	if err != nil {
		return nil, err
	}
	if set == nil {
		return os.ReadFile(j.blobLegacy(kind, name, rel))
	}
	if b, ok := set[rel]; ok {
		return b, nil
	}
	return nil, &fs.PathError{Op: "read", Path: j.blobTar(kind, name) + ": " + rel, Err: fs.ErrNotExist}
}

// hasBlob reports whether a journal copy exists.
func (j *journal) hasBlob(kind, name, rel string) bool {
	set, err := j.blobSet(kind, name)
	if err != nil {
		return true // let the read report it
	}
	if set == nil {
		_, err := os.Lstat(j.blobLegacy(kind, name, rel))
		return err == nil
	}
	_, ok := set[rel]
	return ok
}

func (j *journal) dropBlobs(name string) {
	for _, d := range blobKinds {
		_ = os.Remove(j.blobTar(d, name))
		delete(j.blobCache, d+"/"+name)
		if _, err := os.Lstat(filepath.Join(j.dir, d)); err == nil {
			_ = os.Remove(j.blobTarOld(d, name))
			_ = os.RemoveAll(filepath.Join(j.dir, d, name))
		}
	}
}

// blobWriter writes the journal copies of one entry and collects what must
// be synced for the durable kinds: their tar files, the directories holding
// them, the parents of the directories it made (and the tree root when the
// state directory is new).
type blobWriter struct {
	j     *journal
	tars  map[string]*blobTarFile // by kind
	order []string
	dirs  []string
	seen  map[string]bool
}

type blobTarFile struct {
	f       *os.File
	bw      *bufio.Writer
	tw      *tar.Writer
	durable bool
}

func (j *journal) newBlobWriter() *blobWriter {
	bw := &blobWriter{j: j, tars: map[string]*blobTarFile{}, seen: map[string]bool{}}
	if j.created {
		bw.dir(filepath.Dir(j.dir))
	}
	return bw
}

func (bw *blobWriter) dir(d string) {
	if !bw.seen[d] {
		bw.seen[d] = true
		bw.dirs = append(bw.dirs, d)
	}
}

// write adds one copy to the tar file of its kind. A durable kind is synced
// by sync; the others are only written: they are never needed to restore a
// file.
func (bw *blobWriter) write(kind, name, rel string, data []byte, durable bool) error {
	t := bw.tars[kind]
	if t == nil {
		p := bw.j.blobTar(kind, name)
		made, err := source.MkdirAll(filepath.Dir(p))
		if err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		delete(bw.j.blobCache, kind+"/"+name)
		b := bufio.NewWriterSize(f, 64<<10)
		t = &blobTarFile{f: f, bw: b, tw: tar.NewWriter(b), durable: durable}
		bw.tars[kind] = t
		bw.order = append(bw.order, kind)
		if durable {
			for _, d := range made {
				bw.dir(filepath.Dir(d))
			}
			bw.dir(filepath.Dir(p))
		}
	}
	t.durable = t.durable || durable
	// The time only serves people who extract the copies by hand.
	h := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(data)), ModTime: time.Now().Truncate(time.Second)}
	if err := t.tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := t.tw.Write(data)
	return err
}

// sync ends every tar file and syncs the durable ones, their directories
// and the extra files given, all at once.
func (bw *blobWriter) sync(extra ...*os.File) error {
	files := append([]*os.File(nil), extra...)
	for _, k := range bw.order {
		t := bw.tars[k]
		if err := t.tw.Close(); err != nil {
			return err
		}
		if err := t.bw.Flush(); err != nil {
			return err
		}
		if t.durable {
			files = append(files, t.f)
		}
	}
	return source.SyncAll(files, bw.dirs)
}

// close closes the tar files.
func (bw *blobWriter) close() error {
	var first error
	for _, k := range bw.order {
		if err := bw.tars[k].f.Close(); err != nil && first == nil {
			first = err
		}
	}
	bw.order = nil
	bw.tars = map[string]*blobTarFile{}
	return first
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

// sameBytes reports whether the tree file rel has exactly want (absent when
// want is nil), reading it through a small buffer instead of into memory of
// its own: a check of a file just planned or just written costs a read of
// the page cache and nothing else.
func sameBytes(t source.Tree, rel string, want []byte) (bool, error) {
	wt, ok := t.(source.WritableTree)
	if !ok {
		return sameBytesRead(t, rel, want)
	}
	p, err := diskPath(wt, rel)
	if err != nil {
		return sameBytesRead(t, rel, want)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return want == nil, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("%s: not a regular file", rel)
	}
	if want == nil || st.Size() != int64(len(want)) {
		return false, nil
	}
	buf := compareBuf()
	defer compareBufs.Put(buf)
	off := 0
	for {
		n, err := f.Read(*buf)
		if n > 0 {
			if off+n > len(want) || !bytes.Equal((*buf)[:n], want[off:off+n]) {
				return false, nil
			}
			off += n
		}
		if err == io.EOF {
			return off == len(want), nil
		}
		if err != nil {
			return false, err
		}
	}
}

// hashCurrent is sha256Hex of a tree file ("" when absent), read through a
// small buffer.
func hashCurrent(t source.Tree, rel string) (string, error) {
	wt, ok := t.(source.WritableTree)
	if !ok {
		return hashCurrentRead(t, rel)
	}
	p, err := diskPath(wt, rel)
	if err != nil {
		return hashCurrentRead(t, rel)
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", rel)
	}
	buf := compareBuf()
	defer compareBufs.Put(buf)
	h := sha256.New()
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashCurrentRead(t source.Tree, rel string) (string, error) {
	b, err := readCurrent(t, rel)
	if err != nil {
		return "", err
	}
	return sha256Hex(b), nil
}

func sameBytesRead(t source.Tree, rel string, want []byte) (bool, error) {
	cur, err := readCurrent(t, rel)
	if err != nil {
		return false, err
	}
	return bytes.Equal(cur, want) && (cur == nil) == (want == nil), nil
}

var compareBufs sync.Pool

func compareBuf() *[]byte {
	if b, ok := compareBufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 64<<10)
	return &b
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
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return
	}
	for _, de := range ents {
		n := de.Name()
		for _, d := range blobKinds {
			if name, ok := strings.CutSuffix(n, "."+d+".tar"); ok && !de.IsDir() && j.state.Get(name) == nil {
				_ = os.Remove(filepath.Join(j.dir, n))
			}
		}
	}
	for _, d := range blobKinds {
		ents, err := os.ReadDir(filepath.Join(j.dir, d))
		if err != nil {
			continue
		}
		for _, de := range ents {
			name := de.Name()
			if !de.IsDir() {
				name = strings.TrimSuffix(name, ".tar")
			}
			if j.state.Get(name) == nil {
				_ = os.RemoveAll(filepath.Join(j.dir, d, de.Name()))
			}
		}
		// The directory of an older layout goes once empty.
		_ = os.Remove(filepath.Join(j.dir, d))
	}
}

// restore writes back, for every file of e, the original bytes (or, when
// forced is set and a forced-revert target was recorded, that target).
// A file that already has them is left alone, and its journal copy is not
// even needed.
func (j *journal) restore(e *Entry, useTarget bool) error {
	files := map[string][]byte{}
	var order []string
	for _, f := range e.Files {
		cur, err := readCurrent(j.t, f.Path)
		if err != nil {
			return err
		}
		cleanTemps(j.t, f.Path)
		if !(useTarget && j.hasTarget(e, f)) && isOriginal(cur, f) {
			continue
		}
		want, err := j.wanted(e, f, useTarget)
		if err != nil {
			return err
		}
		if bytes.Equal(cur, want) && (cur == nil) == (want == nil) {
			continue
		}
		files[f.Path] = want
		order = append(order, f.Path)
	}
	if len(order) == 0 {
		return nil
	}
	w, err := prepareTreeWrite(j.t, order, files)
	if err != nil {
		return err
	}
	defer w.cleanup()
	if err := w.syncTemps(nil, nil); err != nil {
		return err
	}
	for i := range order {
		if err := w.commit(i); err != nil {
			return err
		}
	}
	if err := w.syncDirs(nil); err != nil {
		return err
	}
	for _, p := range order {
		removePyc(j.t, p)
	}
	removeCreatedDirs(j.t, e)
	return nil
}

// newDirs lists the directories of rels (repository-relative files the
// patch creates) that do not exist yet, deepest first.
func newDirs(t source.WritableTree, rels []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, rel := range rels {
		for d := path.Dir(rel); d != "." && d != "/" && !seen[d]; d = path.Dir(d) {
			p, err := diskPath(t, d)
			if err != nil {
				break
			}
			if _, err := os.Lstat(p); err == nil {
				break
			}
			seen[d] = true
			out = append(out, d)
		}
	}
	// Deepest first: a child before its parent.
	sort.SliceStable(out, func(i, k int) bool { return strings.Count(out[i], "/") > strings.Count(out[k], "/") })
	return out
}

// dirOfAny reports whether d is a directory above one of files.
func dirOfAny(d string, files []*FileRecord) bool {
	for _, f := range files {
		if strings.HasPrefix(f.Path, d+"/") {
			return true
		}
	}
	return false
}

// removeCreatedDirs removes the directories apply made for e that are
// empty again; a directory that now holds anything stays.
func removeCreatedDirs(t source.WritableTree, e *Entry) {
	for _, d := range e.CreatedDirs {
		p, err := diskPath(t, d)
		if err != nil {
			continue
		}
		if ents, err := os.ReadDir(p); err != nil || len(ents) > 0 {
			continue
		}
		if os.Remove(p) == nil {
			_ = source.SyncDir(filepath.Dir(p))
		}
	}
}

// isOriginal reports whether cur is the original content of f (absent when
// the patch created it).
func isOriginal(cur []byte, f *FileRecord) bool {
	if f.Original == "" {
		return cur == nil
	}
	return cur != nil && sha256Hex(cur) == f.Original
}

// hasTarget reports whether a forced revert recorded a target for f.
func (j *journal) hasTarget(e *Entry, f *FileRecord) bool {
	return j.hasBlob("target", e.Name, f.Path) || j.hasBlob("target", e.Name, f.Path+".deleted")
}

// treeWrite is a set of tree files being written: every new content goes
// to a temporary file first, they are synced together, then each is put in
// place (commit, one by one), then the changed directories are synced.
type treeWrite struct {
	t     source.WritableTree
	rels  []string
	files map[string][]byte
	pw    *source.PendingWrites // nil: the tree only offers WriteFiles
}

// pendingWriter is implemented by trees on disk (source.PendingWrites).
type pendingWriter interface {
	PrepareWrites(rels []string, files map[string][]byte) (*source.PendingWrites, error)
}

func prepareTreeWrite(t source.WritableTree, rels []string, files map[string][]byte) (*treeWrite, error) {
	w := &treeWrite{t: t, rels: rels, files: files}
	if pt, ok := t.(pendingWriter); ok {
		pw, err := pt.PrepareWrites(rels, files)
		if err != nil {
			return nil, err
		}
		w.pw = pw
	}
	return w, nil
}

// syncTemps syncs the temporary files with the extra files and directories.
func (w *treeWrite) syncTemps(extraFiles []*os.File, extraDirs []string) error {
	if w.pw != nil {
		return w.pw.SyncTemps(extraFiles, extraDirs)
	}
	return source.SyncAll(extraFiles, extraDirs)
}

// commit puts the i-th file in place.
func (w *treeWrite) commit(i int) error {
	if w.pw != nil {
		return w.pw.Commit(i)
	}
	rel := w.rels[i]
	return w.t.WriteFiles(map[string][]byte{rel: w.files[rel]})
}

// syncDirs syncs the changed directories and the extra files.
func (w *treeWrite) syncDirs(extraFiles []*os.File) error {
	if w.pw != nil {
		return source.SyncAll(extraFiles, w.pw.Dirs())
	}
	return source.SyncAll(extraFiles, nil)
}

// cleanup removes the temporary files not committed.
func (w *treeWrite) cleanup() {
	if w.pw != nil {
		w.pw.Cleanup()
	}
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
		if j.hasBlob("target", e.Name, f.Path+".deleted") {
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

package patches

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/source"
)

// The journal lives in the tree's state
// directory:
//
//	.smpatch/state.json           applied patches; entries in flight are "pending" or "reverting"
//	.smpatch/NAME.orig.tar        original bytes of every file a patch changed, each at PATH
//	.smpatch/NAME.patched.tar     the bytes the patch wrote (to show drift, and to reverse-apply),
//	                              at PATH or as a delta against the original at PATH.delta (delta.go)
//	.smpatch/NAME.target.tar      bytes a forced revert writes
//	.smpatch/lock                 gofrs/flock; held by every command that reads or writes state
//
// (Earlier journals kept KIND/NAME.tar, and before that KIND/NAME/PATH;
// they are still read.) Apply records a pending entry with the originals first, then
// writes each file (temp + fsync + rename), then marks the entry applied.
// The syncs of each step are done together (source.SyncAll). Any command
// that finds an entry in flight first finishes it the safe way: a pending
// apply is rolled back, an interrupted revert is completed.

// stateFormat is the version of state.json's layout: 2 added the owner
// record, hashes of forced-revert targets and lossless paths; format 1
// journals are read, and adopted with smpatch journal trust.
const stateFormat = 2

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
	// Owner says who wrote the journal, with the signature that proves it
	// (trust.go).
	Owner *Owner `json:"owner,omitempty"`
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
	// Target is the hash of the bytes a forced revert writes (TargetDelete:
	// it removes the file), and Before the hash of the file before that
	// revert: an interrupted forced revert is finished only on files that
	// have one of the hashes it recorded.
	Target       string `json:"target_sha256,omitempty"`
	TargetDelete bool   `json:"target_delete,omitempty"`
	Before       string `json:"before_sha256,omitempty"`
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
	// names lists the state directory's entries as dropOrphans, under the
	// lock, left them, kept up to date as this command adds and removes
	// journal copies; nil until then. See absent.
	names map[string]bool
}

// absent says that the entry name of the state directory is known to be
// missing: the directory was listed under the lock and nothing made the
// name since. Only smpatch holding the lock writes there; a name planted
// by anything else meanwhile makes the exclusive, no-follow create that
// comes next fail instead of being removed first.
func (j *journal) absent(name string) bool {
	return j.names != nil && !j.names[name]
}

// gone records that name is no longer in the state directory.
func (j *journal) gone(name string) {
	if j.names != nil {
		delete(j.names, name)
	}
}

// diskPather is implemented by trees on disk: it maps a repository-relative
// path to the file's absolute path, refusing paths that leave the tree.
type diskPather interface {
	AbsPath(rel string) (string, error)
}

// fileOpener is implemented by trees on disk: it opens a
// repository-relative file for reading, refusing paths that leave the
// tree, in as few system calls as the kernel allows.
type fileOpener interface {
	OpenReader(rel string) (fs.File, error)
}

func diskPath(t source.WritableTree, rel string) (string, error) {
	if d, ok := t.(diskPather); ok {
		return d.AbsPath(rel)
	}
	return "", fmt.Errorf("%s: tree is not on disk", rel)
}

// openJournal creates the state directory if needed and takes the lock,
// waiting for another smpatch until ctx ends. A journal this user did not
// write on this machine is refused (UntrustedError).
func openJournal(ctx context.Context, t source.WritableTree) (*journal, error) {
	return openJournalMode(ctx, t, false)
}

// openJournalMode is openJournal; adopting skips the owner check (for
// TrustJournal, which signs what it read).
func openJournalMode(ctx context.Context, t source.WritableTree, adopting bool) (*journal, error) {
	dir := t.StateDir()
	exists, err := lstatStateDir(dir)
	if err != nil {
		return nil, err
	}
	created := false
	if !exists {
		created = true
		if err := checkDirWritable(filepath.Dir(dir)); err != nil {
			return nil, err
		}
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("journal: %w", err)
		}
		if t.Kind() == source.KindCheckout {
			if err := addGitExclude(t.Root()); err != nil {
				return nil, fmt.Errorf("journal: .git/info/exclude: %w", err)
			}
		}
	}
	lockPath := filepath.Join(dir, "lock")
	for first := true; ; first = false {
		// On the first pass over a directory that was there, it was
		// just looked at (lstatStateDir above) and nothing came between.
		if !first || !exists {
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("journal: %w", err)
			}
			if _, err := lstatStateDir(dir); err != nil {
				return nil, err
			}
		}
		writeStateGitignore(dir)
		l := flock.New(lockPath, flock.SetFlag(os.O_CREATE|os.O_RDONLY|syscall.O_NOFOLLOW))
		ok, err := l.TryLockContext(ctx, 20*time.Millisecond)
		if err != nil {
			// The holder before us removed the journal (a revert that
			// left nothing applied) between our mkdir and our open:
			// make it again.
			if errors.Is(err, fs.ErrNotExist) && ctx.Err() == nil {
				continue
			}
			if errors.Is(err, syscall.ELOOP) {
				return nil, fmt.Errorf("journal lock %s: a symlink; refusing (remove it)", lockPath)
			}
			return nil, fmt.Errorf("journal lock %s: %w", lockPath, err)
		}
		if !ok {
			return nil, fmt.Errorf("journal lock %s: not acquired", lockPath)
		}
		// The holder before us may have removed the state directory (a
		// revert that left nothing applied): the lock we hold is then on a
		// file nobody else can see. Take it again on the current file.
		held, err1 := l.Stat()
		cur, err2 := os.Lstat(lockPath)
		if err1 == nil && err2 == nil && os.SameFile(held, cur) {
			j := &journal{t: t, dir: dir, lock: l, created: created}
			if err := j.load(adopting); err != nil {
				_ = l.Unlock()
				return nil, err
			}
			if h, ok := t.(rootHolder); ok {
				// Released by close: the tree files read and written
				// under the lock are opened beneath one open root.
				h.HoldRoot()
			}
			return j, nil
		}
		_ = l.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// writeStateGitignore puts a .gitignore ignoring everything in the state
// directory, so that a tree vendored inside another repository (where
// .git/info/exclude is not the tree's) stays clean. An existing entry of
// that name is left alone (O_EXCL: never followed).
func writeStateGitignore(dir string) {
	f, err := source.OpenNoPoll(filepath.Join(dir, ".gitignore"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return
	}
	_, _ = f.WriteString("# smpatch's journal: not part of the tree\n*\n")
	_ = f.Close()
}

// close saves nothing; it releases the lock, removing the state directory
// first when nothing is applied any more. Only the journal's own files go,
// each by name, the lock last: a command that opened the lock file before
// it was removed finds, once it holds the lock, that the file is no longer
// the one at the lock's path and takes the lock again (openJournal). The
// directory itself goes only when empty: another command may have made a
// new lock in it already.
func (j *journal) close() {
	if j.state != nil && len(j.state.Patches) == 0 {
		if ok, err := lstatStateDir(j.dir); ok && err == nil {
			if ents, err := os.ReadDir(j.dir); err == nil {
				for _, de := range ents {
					n := de.Name()
					p := filepath.Join(j.dir, n)
					switch {
					case n == "lock":
					case de.IsDir():
						// Directories of older layouts (orig/, patched/,
						// target/): real directories, never symlinks;
						// RemoveAll follows no link inside them.
						if isRealDir(p) {
							_ = os.RemoveAll(p)
						}
					default:
						_ = os.Remove(p)
					}
				}
			}
			_ = os.Remove(filepath.Join(j.dir, "lock"))
			// A directory (lstatStateDir): rmdir, without the unlink
			// os.Remove tries first.
			_ = syscall.Rmdir(j.dir)
		}
	}
	if h, ok := j.t.(rootHolder); ok {
		h.ReleaseRoot()
	}
	_ = j.lock.Unlock()
}

// rootHolder is implemented by trees on disk: the root stays open from
// HoldRoot to ReleaseRoot (source's dirTree).
type rootHolder interface {
	HoldRoot()
	ReleaseRoot()
}

func (j *journal) statePath() string { return filepath.Join(j.dir, "state.json") }

func (j *journal) load(adopting bool) error {
	f, st, err := openInJournal(j.dir, journalStateJSON)
	if errors.Is(err, fs.ErrNotExist) {
		j.state = &State{Format: stateFormat, Tree: j.t.Root(), Kind: string(j.t.Kind())}
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	if st.Size() > maxStateBytes {
		return &JournalError{Path: j.statePath(), Msg: fmt.Sprintf("%d bytes, more than the %d a journal may have", st.Size(), maxStateBytes)}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	s, err := parseState(j.statePath(), data)
	if err != nil {
		return err
	}
	if !adopting {
		if why := checkOwner(s); why != "" {
			return &UntrustedError{Path: j.statePath(), Tree: j.t.Root(), Reason: why}
		}
	}
	j.state = s
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
	if j.state.Format < stateFormat {
		j.state.Format = stateFormat
	}
	data, err := signedState(j.state)
	if err != nil {
		return nil, err
	}
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
	if err := source.Rename(st.f.Name(), st.path); err != nil {
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

// blobSet reads (once) the tar file of one kind and entry: path → bytes;
// nil without error when there is none. Only the copies the entry records
// are kept (a copy under any other name is ignored), each bounded.
func (j *journal) blobSet(kind, name string) (map[string][]byte, error) {
	key := kind + "/" + name
	if set, ok := j.blobCache[key]; ok {
		return set, nil
	}
	want := map[string]bool{}
	files := 0
	if e := j.state.Get(name); e != nil {
		files = len(e.Files)
		for _, f := range e.Files {
			want[f.Path] = true
			want[f.Path+".deleted"] = true
			if kind == "patched" && f.Original != "" {
				want[f.Path+deltaSuffix] = true
			}
		}
	}
	rel := name + "." + kind + ".tar"
	f, st, err := openInJournal(j.dir, rel)
	if errors.Is(err, fs.ErrNotExist) {
		rel = kind + "/" + name + ".tar"
		f, st, err = openInJournal(j.dir, rel)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	set, err := readCopies(filepath.Join(j.dir, filepath.FromSlash(rel)), f, st.Size(), want, files)
	if err != nil {
		return nil, err
	}
	if j.blobCache == nil {
		j.blobCache = map[string]map[string][]byte{}
	}
	j.blobCache[key] = set
	return set, nil
}

// readBlob reads a journal copy and checks it against the hash the entry
// recorded for it; a missing one is an error satisfying
// errors.Is(err, fs.ErrNotExist), a copy with other bytes a JournalError.
func (j *journal) readBlob(kind, name, rel string) ([]byte, error) {
	var rec *FileRecord
	if e := j.state.Get(name); e != nil {
		for _, f := range e.Files {
			if f.Path == rel {
				rec = f
			}
		}
	}
	wantHash := ""
	if rec != nil {
		switch kind {
		case "orig":
			wantHash = rec.Original
		case "patched":
			wantHash = rec.Patched
		case "target":
			wantHash = rec.Target
		}
	}
	missing := &fs.PathError{Op: "read", Path: j.blobTar(kind, name) + ": " + rel, Err: fs.ErrNotExist}
	if wantHash == "" {
		// Nothing recorded: no copy can be proved right.
		return nil, missing
	}
	set, err := j.blobSet(kind, name)
	if err != nil {
		return nil, err
	}
	var b []byte
	where := j.blobTar(kind, name)
	if set == nil {
		legacy := kind + "/" + name + "/" + rel
		where = filepath.Join(j.dir, filepath.FromSlash(legacy))
		f, st, err := openInJournal(j.dir, legacy)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, missing
		}
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if st.Size() > maxCopyBytes {
			return nil, &JournalError{Path: where, Msg: fmt.Sprintf("%d bytes, more than a copy may have", st.Size())}
		}
		if b, err = io.ReadAll(io.LimitReader(f, maxCopyBytes+1)); err != nil {
			return nil, err
		}
	} else {
		var ok bool
		if kind == "patched" {
			if b, ok, err = j.patchedCopy(name, rel, rec, set); err != nil {
				return nil, err
			}
		} else {
			b, ok = set[rel]
		}
		if !ok {
			return nil, missing
		}
	}
	if h := sha256Hex(b); h != wantHash {
		return nil, &JournalError{Path: where, Msg: fmt.Sprintf("the copy of %s has sha256 %s, the journal recorded %s", displayLine(rel), h[:12], wantHash[:12])}
	}
	return b, nil
}

// copyState says whether the copies of e's original bytes are all there
// and right: "" when they are, else what is wrong, for people.
func (j *journal) copyState(e *Entry) string {
	var missing []string
	for _, f := range e.Files {
		if f.Original == "" {
			continue
		}
		_, err := j.readBlob("orig", e.Name, f.Path)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, f.Path)
		default:
			return err.Error()
		}
	}
	if len(missing) == 0 {
		return ""
	}
	if _, err := os.Lstat(j.blobTar("orig", e.Name)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("%s is missing: the original bytes of %d file(s) cannot be restored", j.blobTar("orig", e.Name), len(missing))
	}
	return fmt.Sprintf("%s has no copy of %s: its original bytes cannot be restored", j.blobTar("orig", e.Name), displayLine(strings.Join(missing, ", ")))
}

func (j *journal) dropBlobs(name string) {
	for _, d := range blobKinds {
		if p := j.blobTar(d, name); !j.absent(filepath.Base(p)) && removeName(p) {
			j.gone(filepath.Base(p))
		}
		delete(j.blobCache, d+"/"+name)
		if !j.absent(d) && isRealDir(filepath.Join(j.dir, d)) {
			_ = os.Remove(j.blobTarOld(d, name))
			if p := filepath.Join(j.dir, d, name); isRealDir(p) {
				_ = os.RemoveAll(p)
			}
		}
	}
}

// removeName is os.Remove without its answer, and without the rmdir
// os.Remove tries after unlink fails when unlink already said nothing is
// there (most of the names a journal clears before writing are not).
func removeName(p string) (gone bool) {
	if err := syscall.Unlink(p); err == nil || err == syscall.ENOENT {
		return true
	}
	err := os.Remove(p)
	return err == nil || errors.Is(err, fs.ErrNotExist)
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
		var made []string
		if bw.j.names == nil {
			// Not listed under the lock (dropOrphans): the directory may
			// need making.
			var err error
			if made, err = source.MkdirAll(filepath.Dir(p)); err != nil {
				return err
			}
		}
		// Never through a symlink planted in the journal directory.
		if !bw.j.absent(filepath.Base(p)) {
			removeName(p)
		}
		f, err := source.OpenNoPoll(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			return err
		}
		if bw.j.names != nil {
			bw.j.names[filepath.Base(p)] = true
		}
		delete(bw.j.blobCache, kind+"/"+name)
		// A small buffer: headers and padding are gathered, a copy's bytes
		// go to the file as they are.
		b := bufio.NewWriterSize(f, 4<<10)
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

// finish ends every tar file and returns what must be synced: the durable
// tar files and the directories holding them.
func (bw *blobWriter) finish() ([]*os.File, []string, error) {
	var files []*os.File
	for _, k := range bw.order {
		t := bw.tars[k]
		if err := t.tw.Close(); err != nil {
			return nil, nil, err
		}
		if err := t.bw.Flush(); err != nil {
			return nil, nil, err
		}
		if t.durable {
			files = append(files, t.f)
		}
	}
	return files, bw.dirs, nil
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
	fo, ok := t.(fileOpener)
	if !ok {
		return sameBytesRead(t, rel, want)
	}
	f, err := fo.OpenReader(rel)
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
	fo, ok := t.(fileOpener)
	if !ok {
		return hashCurrentRead(t, rel)
	}
	f, err := fo.OpenReader(rel)
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
	// Newest first: one apply records the entries of its patches together,
	// and each is rolled back before those it was planned on.
	ents := append([]*Entry(nil), j.state.Patches...)
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
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
// (a crash before the pending entry was saved wrote no tree file), and
// temporary copies of state.json a crash left before renaming one in.
func (j *journal) dropOrphans() {
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return
	}
	names := make(map[string]bool, len(ents))
	for _, de := range ents {
		n := de.Name()
		names[n] = true
		if de.Type().IsRegular() && isTempOf(n, "state.json") {
			_ = os.Remove(filepath.Join(j.dir, n))
			continue
		}
		for _, d := range blobKinds {
			if name, ok := strings.CutSuffix(n, "."+d+".tar"); ok && !de.IsDir() && j.state.Get(name) == nil {
				if os.Remove(filepath.Join(j.dir, n)) == nil {
					delete(names, n)
				}
			}
		}
	}
	// Used from here on by absent: a name not listed is not there.
	defer func() { j.names = names }()
	for _, d := range blobKinds {
		if !names[d] || !isRealDir(filepath.Join(j.dir, d)) {
			continue
		}
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
				if p := filepath.Join(j.dir, d, de.Name()); de.IsDir() {
					_ = os.RemoveAll(p)
				} else {
					_ = os.Remove(p)
				}
			}
		}
		// The directory of an older layout goes once empty.
		if os.Remove(filepath.Join(j.dir, d)) == nil {
			delete(names, d)
		}
	}
}

// restore writes back, for every file of e, the original bytes (or, when
// useTarget is set and a forced-revert target was recorded, that target).
// A file that already has them is left alone, and its journal copy is not
// even needed. Every file must have bytes the interrupted command could
// have left (its original or patched bytes; for a revert also the target
// and the bytes before it): a file edited since makes it refuse with
// exit.RevertRefused, nothing written.
func (j *journal) restore(e *Entry, useTarget bool) error {
	files := map[string][]byte{}
	var order, edited []string
	what := "apply"
	if useTarget {
		what = "revert"
	}
	for _, f := range e.Files {
		if _, err := guardTreePath(j.t, f.Path); err != nil {
			return err
		}
		cleanTemps(j.t, f.Path)
		h, err := hashCurrent(j.t, f.Path)
		if err != nil {
			return err
		}
		ok := h == f.Original || h == f.Patched
		if useTarget {
			ok = ok || (f.Target != "" && h == f.Target) || (f.Before != "" && h == f.Before) || (f.TargetDelete && h == "")
		}
		if !ok {
			edited = append(edited, f.Path)
		}
	}
	if len(edited) > 0 {
		return exit.With(exit.RevertRefused, fmt.Errorf("%s changed since the interrupted %s of %s (neither the bytes before it nor the bytes it wrote); nothing written: keep your edits, or put the file back, then run `smpatch journal forget %s` to drop the entry and keep the tree as it is",
			displayLine(strings.Join(edited, ", ")), what, e.Name, e.Name))
	}
	for _, f := range e.Files {
		target := useTarget && (f.Target != "" || f.TargetDelete)
		cur, err := readCurrent(j.t, f.Path)
		if err != nil {
			return err
		}
		if !target && isOriginal(cur, f) {
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
		p, err := guardTreePath(t, d)
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
// or after a revert (target when recorded, else originals). Every copy is
// checked against the hash recorded for it.
func (j *journal) wanted(e *Entry, f *FileRecord, useTarget bool) ([]byte, error) {
	if useTarget {
		if f.TargetDelete {
			return nil, nil
		}
		if f.Target != "" {
			b, err := j.readBlob("target", e.Name, f.Path)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, &JournalError{Path: j.blobTar("target", e.Name), Msg: fmt.Sprintf("no copy of the bytes a forced revert writes to %s", displayLine(f.Path))}
			}
			return b, err
		}
	}
	if f.Original == "" {
		return nil, nil // the patch created it
	}
	b, err := j.readBlob("orig", e.Name, f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &JournalError{Path: j.statePath(), Msg: j.copyState(e) + "; nothing written (`smpatch journal forget " + e.Name + "` drops the entry and keeps the tree as it is)"}
	}
	return b, err
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
	for _, de := range ents {
		if de.Type().IsRegular() && isTempOf(de.Name(), base) {
			_ = os.Remove(filepath.Join(dir, de.Name()))
		}
	}
}

// isTempOf reports whether the file name n is a temporary file written
// for base (source.WriteTemp and renameio name them ".BASE" followed by
// digits). Matched as bytes, not by a regular expression: a name need not
// be UTF-8.
func isTempOf(n, base string) bool {
	digits, ok := strings.CutPrefix(n, "."+base)
	if !ok || digits == "" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return false
		}
	}
	return true
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
		if why := reservedPath(rel); why != "" {
			return fmt.Errorf("%s: %s; smpatch never writes there", rel, why)
		}
		pc, err := guardTreeCheck(t, rel)
		if err != nil {
			return err
		}
		p := pc.Abs
		// The check of the path looked at the file and its directory
		// already (pc.Seen): no second look.
		st, err := pc.File, error(nil)
		if !pc.Seen {
			st, err = os.Lstat(p)
		} else if st == nil {
			err = fs.ErrNotExist
		}
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
		var dst os.FileInfo
		if pc.Seen {
			dst = pc.Dir
		}
		for dst == nil {
			if dst, err = os.Stat(dir); err == nil {
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
		if dst == nil {
			err = checkDirWritable(dir)
		} else {
			err = dirWritable(dir, dst)
		}
		if err != nil {
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
	return dirWritable(dir, st)
}

// dirWritable is checkDirWritable on what os.Stat said of dir.
func dirWritable(dir string, st os.FileInfo) error {
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
	// Only a git directory (HEAD in it) gets the line, and never through a
	// symlinked info/ or exclude: a .git file from an archive can name any
	// directory.
	if st, err := os.Stat(filepath.Join(gitDir, "HEAD")); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	info := filepath.Join(gitDir, "info")
	if st, err := os.Lstat(info); err == nil && !st.IsDir() {
		return nil
	}
	excl := filepath.Join(info, "exclude")
	var data []byte
	if st, err := os.Lstat(excl); err == nil {
		if !st.Mode().IsRegular() || st.Size() > 1<<20 {
			return nil
		}
		if data, err = os.ReadFile(excl); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
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
	if err := os.Mkdir(info, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return source.WriteFileAtomic(excl, data, 0o644)
}

// ReadState returns the journal of t, after finishing any entry left in
// flight (State.Recovered says what was done). A tree without a journal has
// an empty state and is not touched.
func ReadState(ctx context.Context, t source.WritableTree) (*State, error) {
	if ok, err := lstatStateDir(t.StateDir()); err != nil {
		return nil, err
	} else if !ok {
		return &State{Format: stateFormat, Tree: t.Root(), Kind: string(t.Kind())}, nil
	}
	if _, err := os.Lstat(filepath.Join(t.StateDir(), journalStateJSON)); errors.Is(err, fs.ErrNotExist) {
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

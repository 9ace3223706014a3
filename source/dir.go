package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/google/renameio/v2"
	"github.com/hashicorp/go-version"
)

// StateDirName is the directory, in a tree's root, that holds smpatch's journal.
const StateDirName = ".smpatch"

// dirTree is a tree on disk: a checkout, or an installed package whose
// repository paths map to package paths.
type dirTree struct {
	root    string // absolute, symlinks resolved
	kind    Kind
	project Project
	// toDisk maps a repository-relative path to a root-relative one.
	toDisk func(rel string) (string, bool)
	// fromDisk maps a root-relative path back to a repository-relative one.
	fromDisk func(rel string) (string, bool)
	// held is the root kept open between HoldRoot and ReleaseRoot.
	held heldRoot
}

// HoldRoot keeps the tree's root open, for resolving paths beneath it,
// until as many ReleaseRoot calls: the journal holds it while it holds
// its lock, the short stretch in which a command reads and writes the
// tree most. Reads outside it open the root each time, so that a tree
// kept by a long-lived caller follows its root path, as it always has.
func (t *dirTree) HoldRoot() { t.held.hold(t.root) }

// ReleaseRoot ends one HoldRoot.
func (t *dirTree) ReleaseRoot() { t.held.release() }

// OpenCheckout opens dir as a source checkout of sglang or flashinfer. A
// directory that is neither returns an error wrapping ErrUnknownProject.
func OpenCheckout(dir string) (WritableTree, error) {
	root, err := cleanRoot(dir)
	if err != nil {
		return nil, err
	}
	p, ok := DetectCheckout(root)
	if !ok {
		return nil, fmt.Errorf("%s: %w", dir, ErrUnknownProject)
	}
	return newCheckout(root, p), nil
}

// newCheckout is OpenCheckout of a root already resolved (cleanRoot) and
// found to be a checkout of p.
func newCheckout(root string, p Project) WritableTree {
	identity := func(rel string) (string, bool) { return rel, true }
	return &dirTree{root: root, kind: KindCheckout, project: p, toDisk: identity, fromDisk: identity}
}

func cleanRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(root)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s: not a directory", dir)
	}
	return root, nil
}

func (t *dirTree) Root() string     { return t.root }
func (t *dirTree) Kind() Kind       { return t.kind }
func (t *dirTree) Project() Project { return t.project }
func (t *dirTree) StateDir() string { return filepath.Join(t.root, StateDirName) }

// Version reads the project version from the tree: the version.py literal,
// then dist-info METADATA, then the nearest git tag.
func (t *dirTree) Version(ctx context.Context) (*version.Version, string, error) {
	return detectVersion(ctx, t)
}

// CleanRel checks a repository-relative path: slash-separated, relative, no
// "..", not empty. It returns the cleaned path.
func CleanRel(rel string) (string, error) {
	if rel == "" {
		return "", errors.New("empty path")
	}
	if strings.ContainsRune(rel, 0) {
		return "", fmt.Errorf("%q: NUL in path", rel)
	}
	if strings.Contains(rel, `\`) {
		return "", fmt.Errorf("%s: backslash in path", rel)
	}
	if path.IsAbs(rel) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s: absolute path", rel)
	}
	for _, part := range strings.Split(rel, "/") {
		if part == ".." {
			return "", fmt.Errorf("%s: path leaves the tree (..)", rel)
		}
	}
	c := path.Clean(rel)
	if c == "." {
		return "", fmt.Errorf("%q: not a file path", rel)
	}
	return c, nil
}

// abs maps a repository-relative path to an absolute path under the root,
// refusing anything that leaves the root, including through a symlink.
func (t *dirTree) abs(rel string) (string, error) {
	c, err := CleanRel(rel)
	if err != nil {
		return "", err
	}
	d, ok := t.toDisk(c)
	if !ok {
		return "", fmt.Errorf("%s: not part of the installed %s package", rel, t.project)
	}
	p := filepath.Join(t.root, filepath.FromSlash(d))
	if _, err := confinedLink(t.root, p); err != nil {
		return "", fmt.Errorf("%s: %w", rel, err)
	}
	return p, nil
}

// ResolvedPath is AbsPath, and beside it where that path lands with every
// symlink on its existing prefix resolved (ResolveExisting). The root is
// resolved already, so when no component below it is a symlink, which
// the check of the path has just seen, the two are the same and nothing
// more is asked of the filesystem.
func (t *dirTree) ResolvedPath(rel string) (abs, resolved string, err error) {
	pc, err := t.CheckPath(rel)
	return pc.Abs, pc.Resolved, err
}

// PathCheck is what the check of a tree path (CheckPath) found.
type PathCheck struct {
	// Abs is AbsPath's answer; Resolved is ResolvedPath's.
	Abs, Resolved string
	// Seen says that the check looked at the path itself and at its
	// directory, one Lstat each, and found no symlink: Dir is the
	// directory's Lstat (what Stat would say), File the path's, nil when
	// the path is missing (its directory is there). Without Seen, ask the
	// filesystem again.
	Seen      bool
	File, Dir fs.FileInfo
}

// CheckPath is ResolvedPath, keeping what the check saw on the way
// (PathCheck), so that a caller needs no second Lstat of the file or its
// directory.
func (t *dirTree) CheckPath(rel string) (PathCheck, error) {
	c, err := CleanRel(rel)
	if err != nil {
		return PathCheck{}, err
	}
	d, ok := t.toDisk(c)
	if !ok {
		return PathCheck{}, fmt.Errorf("%s: not part of the installed %s package", rel, t.project)
	}
	p := filepath.Join(t.root, filepath.FromSlash(d))
	pc, link, err := confinedWalk(t.root, p)
	if err != nil {
		return PathCheck{}, fmt.Errorf("%s: %w", rel, err)
	}
	pc.Abs, pc.Resolved = p, p
	if link {
		if r, err := ResolveExisting(p); err == nil {
			pc.Resolved = r
		} // else, as ResolveExisting's callers do: the path as it is written
	}
	return pc, nil
}

// confined checks that p, with every symlink on its existing prefix
// resolved, stays inside root. root is already resolved (cleanRoot), so
// only the components below it are looked at: one Lstat each, and only a
// symlink among them needs the full resolution.
func confined(root, p string) error {
	_, err := confinedLink(root, p)
	return err
}

// confinedLink is confined, and says whether a component of p below root
// is a symlink.
func confinedLink(root, p string) (link bool, err error) {
	_, link, err = confinedWalk(root, p)
	return link, err
}

// confinedWalk is confinedLink, and keeps the Lstat answers of p and of
// its directory (PathCheck's Seen, File and Dir).
func confinedWalk(root, p string) (pc PathCheck, link bool, err error) {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return pc, false, errors.New("path leads outside the tree")
	}
	if rel == "." {
		return pc, false, nil
	}
	parts := strings.Split(rel, string(filepath.Separator))
	cur := root
	var prev fs.FileInfo
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		st, err := os.Lstat(cur)
		if err != nil {
			// Nothing exists from here on: there is no link left to follow.
			if i == len(parts)-1 && prev != nil && errors.Is(err, fs.ErrNotExist) {
				pc.Seen, pc.Dir = true, prev
			}
			return pc, false, nil
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return pc, true, confinedResolved(root, p)
		}
		if i == len(parts)-1 && prev != nil {
			pc.Seen, pc.File, pc.Dir = true, st, prev
		}
		prev = st
	}
	return pc, false, nil
}

// confinedResolved is confined for a path with a symlink on it: the
// existing prefix is resolved in full and must stay inside root.
func confinedResolved(root, p string) error {
	resolved, err := ResolveExisting(p)
	if err != nil {
		return err
	}
	if !within(root, resolved) {
		return errors.New("path leads outside the tree through a symlink")
	}
	return nil
}

// ResolveExisting resolves the symlinks of the longest existing prefix of p
// and appends the rest of p to it: where p would land once created.
func ResolveExisting(p string) (string, error) {
	existing := p
	var rest []string
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = append(rest, filepath.Base(existing))
		existing = parent
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", err
	}
	for i := len(rest) - 1; i >= 0; i-- {
		resolved = filepath.Join(resolved, rest[i])
	}
	return resolved, nil
}

func within(root, p string) bool {
	if p == root {
		return true
	}
	r := root
	if !strings.HasSuffix(r, string(filepath.Separator)) {
		r += string(filepath.Separator)
	}
	return strings.HasPrefix(p, r)
}

// diskRel is the repository-relative rel cleaned and mapped to its path
// under the root (OS separators), for opening beneath the root.
func (t *dirTree) diskRel(rel string) (string, error) {
	c, err := CleanRel(rel)
	if err != nil {
		return "", err
	}
	d, ok := t.toDisk(c)
	if !ok {
		return "", fmt.Errorf("%s: not part of the installed %s package", rel, t.project)
	}
	return filepath.FromSlash(d), nil
}

// OpenReader opens the repository-relative file rel for reading, refusing
// a path that leaves the tree, including through a symlink (the error
// says which, as abs does). A missing file is an error satisfying
// errors.Is(err, fs.ErrNotExist). The file comes on its bare descriptor:
// read(2) as it is, without the fcntl and the epoll_ctl os.File asks for
// each file (see rawFile). Stat it before reading: it may be a FIFO or a
// device.
func (t *dirTree) OpenReader(rel string) (fs.File, error) {
	d, err := t.diskRel(rel)
	if err != nil {
		return nil, err
	}
	if f, done, err := openBeneath(t, d); done {
		return f, err
	}
	p, err := t.abs(rel)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	return OpenRead(p, syscall.O_NONBLOCK)
}

func (t *dirTree) ReadFile(rel string) ([]byte, error) {
	f, err := t.OpenReader(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", rel)
	}
	// One read of the size fstat gave, then one more to see the end (the
	// file may have grown).
	b := make([]byte, 0, st.Size()+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// ListFiles lists regular files under the repository-relative dir, sorted,
// skipping VCS, journal and bytecode directories.
func (t *dirTree) ListFiles(dir string) ([]string, error) {
	if dir == "" || dir == "." {
		if t.kind != KindSitePackages {
			return t.listUnder(t.root)
		}
		var all []string
		for _, r := range ProjectRoots(t.project) {
			fs, err := t.ListFiles(strings.TrimSuffix(r, "/"))
			if err != nil {
				return nil, err
			}
			all = append(all, fs...)
		}
		sort.Strings(all)
		return all, nil
	}
	p, err := t.abs(dir)
	if err != nil {
		return nil, err
	}
	return t.listUnder(p)
}

func (t *dirTree) listUnder(start string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == start {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", StateDirName, "__pycache__", "node_modules":
				if p != start {
					return fs.SkipDir
				}
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		r, err := filepath.Rel(t.root, p)
		if err != nil {
			return err
		}
		repo, ok := t.fromDisk(filepath.ToSlash(r))
		if ok {
			out = append(out, repo)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// WriteFiles writes each file by temp + fsync + rename, keeping an existing
// file's mode. A nil value removes the file. Every path is checked before
// anything is written. The temporary files are synced together and each
// changed directory once (see PrepareWrites).
func (t *dirTree) WriteFiles(files map[string][]byte) error {
	keys := slices.Sorted(maps.Keys(files))
	pw, err := t.PrepareWrites(keys, files)
	if err != nil {
		return err
	}
	defer pw.Cleanup()
	if err := pw.SyncTemps(nil, nil); err != nil {
		return err
	}
	for i := range keys {
		if err := pw.Commit(i); err != nil {
			return err
		}
	}
	return pw.SyncDirs()
}

// PendingWrites is a set of tree files written with as few waits for the
// disk as crash safety allows: PrepareWrites writes every new content to a
// temporary file beside its target, SyncTemps syncs them all at once,
// Commit puts each in place (rename, or removal for nil content) and
// SyncDirs syncs every changed directory once. Until the first Commit the
// tree's files are unchanged (only hidden temporary files ".NAME<digits>"
// exist beside them); Cleanup removes the temporary files not committed.
type PendingWrites struct {
	items []*pendingWrite
	dirs  []string // directories whose entries change, each once
	made  []string // directories made for new files, outermost first
}

type pendingWrite struct {
	rel, abs string
	tmp      *os.File // nil for a removal
	tmpName  string
	done     bool
	// seen: st is the check's Lstat of abs (nil: missing), and abs's
	// directory exists (PathCheck).
	seen bool
	st   fs.FileInfo
}

// PrepareWrites checks every path of rels (repository-relative, in the
// order Commit will take them) and writes the temporary file of each one
// whose content in files is not nil. Nothing is synced yet.
func (t *dirTree) PrepareWrites(rels []string, files map[string][]byte) (*PendingWrites, error) {
	pw := &PendingWrites{}
	seenDir := map[string]bool{}
	addDir := func(d string) {
		if !seenDir[d] {
			seenDir[d] = true
			pw.dirs = append(pw.dirs, d)
		}
	}
	for _, rel := range rels {
		pc, err := t.CheckPath(rel)
		if err != nil {
			return nil, err
		}
		st, err := pc.File, error(nil)
		if !pc.Seen {
			st, err = os.Lstat(pc.Abs)
		}
		if err == nil && st != nil && !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s: not a regular file", rel)
		}
		pw.items = append(pw.items, &pendingWrite{rel: rel, abs: pc.Abs, seen: pc.Seen, st: pc.File})
	}
	for _, it := range pw.items {
		data := files[it.rel]
		dir := filepath.Dir(it.abs)
		if data == nil {
			addDir(dir)
			continue
		}
		var created []string
		if !it.seen {
			// Its directory was seen by the check (no symlink, a
			// directory): nothing to make.
			var err error
			if created, err = mkdirAllReport(dir); err != nil {
				pw.Cleanup()
				return nil, err
			}
		}
		// A directory made here is durable once its parent is synced.
		for _, c := range created {
			addDir(filepath.Dir(c))
		}
		pw.made = append(pw.made, created...)
		addDir(dir)
		f, err := writeTemp(it.abs, data, it.seen, it.st)
		if err != nil {
			pw.Cleanup()
			return nil, err
		}
		it.tmp, it.tmpName = f, f.Name()
	}
	return pw, nil
}

// SyncTemps syncs every temporary file, and the extra files and
// directories given, all at once.
func (pw *PendingWrites) SyncTemps(extraFiles []*os.File, extraDirs []string) error {
	files := append([]*os.File(nil), extraFiles...)
	for _, it := range pw.items {
		if it.tmp != nil {
			files = append(files, it.tmp)
		}
	}
	return SyncAll(files, extraDirs)
}

// Len is the number of files of the set.
func (pw *PendingWrites) Len() int { return len(pw.items) }

// Commit puts the i-th file in place: its temporary file is renamed over
// it, or it is removed.
func (pw *PendingWrites) Commit(i int) error {
	it := pw.items[i]
	if it.done {
		return nil
	}
	if it.tmp == nil {
		if err := os.Remove(it.abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		it.done = true
		return nil
	}
	if err := it.tmp.Close(); err != nil {
		return err
	}
	it.tmp = nil
	if err := Rename(it.tmpName, it.abs); err != nil {
		_ = os.Remove(it.tmpName)
		it.done = true
		return err
	}
	it.done = true
	return nil
}

// SyncDirs syncs every directory whose entries the set changed, at once.
func (pw *PendingWrites) SyncDirs() error { return SyncAll(nil, pw.dirs) }

// Dirs lists the directories whose entries the set changes (for syncing
// them together with other files, SyncAll).
func (pw *PendingWrites) Dirs() []string { return append([]string(nil), pw.dirs...) }

// Cleanup removes the temporary files that were not committed, and the
// directories made for them that stayed empty.
func (pw *PendingWrites) Cleanup() {
	for _, it := range pw.items {
		if it.done || it.tmpName == "" {
			continue
		}
		if it.tmp != nil {
			_ = it.tmp.Close()
			it.tmp = nil
		}
		_ = os.Remove(it.tmpName)
		it.done = true
	}
	for i := len(pw.made) - 1; i >= 0; i-- {
		_ = os.Remove(pw.made[i]) // fails, as it should, unless empty
	}
	pw.made = nil
}

// WriteTemp writes data to a new temporary file beside name, named as
// renameio names them (".BASE" and digits), with the mode of an existing
// name (0644 otherwise) and, where permitted, its owner. The file is left
// open and unsynced: the caller syncs it (SyncAll), closes it and renames
// it over name.
func WriteTemp(name string, data []byte) (*os.File, error) {
	return writeTemp(name, data, false, nil)
}

// writeTemp is WriteTemp; with seen, st is an Lstat of name just made
// (nil: missing) and is not asked again.
func writeTemp(name string, data []byte, seen bool, st fs.FileInfo) (*os.File, error) {
	perm := os.FileMode(0o644)
	var owner *syscall.Stat_t
	var err error
	if !seen {
		st, err = os.Lstat(name)
	}
	if st == nil && err == nil {
		err = fs.ErrNotExist
	}
	if err == nil && st.Mode().IsRegular() {
		perm = st.Mode().Perm()
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
			owner = sys
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	prefix := filepath.Join(filepath.Dir(name), "."+filepath.Base(name))
	var f *os.File
	for attempt := 0; ; attempt++ {
		var err error
		f, err = OpenNoPoll(prefix+strconv.FormatInt(rand.Int64(), 10), os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || attempt > 10000 {
			return nil, err
		}
	}
	fail := func(err error) (*os.File, error) {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	// The umask may have narrowed the mode given to open.
	if st, err := f.Stat(); err != nil {
		return fail(err)
	} else if st.Mode().Perm() != perm {
		if err := f.Chmod(perm); err != nil {
			return fail(err)
		}
	}
	if owner != nil {
		_ = f.Chown(int(owner.Uid), int(owner.Gid))
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	return f, nil
}

// MkdirAll is os.MkdirAll (mode 0755) that also returns the directories
// it made, outermost first: each is durable once its parent is synced.
func MkdirAll(dir string) ([]string, error) { return mkdirAllReport(dir) }

func mkdirAllReport(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; {
		if st, err := os.Stat(d); err == nil {
			if !st.IsDir() {
				return nil, &fs.PathError{Op: "mkdir", Path: d, Err: syscall.ENOTDIR}
			}
			break
		}
		missing = append(missing, d)
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return made, err
		}
		made = append(made, missing[i])
	}
	return made, nil
}

// SyncAll fsyncs every file and directory given and returns the first
// error. On a disk they are synced concurrently: the filesystem can then
// commit them together instead of one after another. On a filesystem held
// in memory (tmpfs, ramfs), where an fsync never waits for a device, they
// are synced one after another, and no thread is started for them.
func SyncAll(files []*os.File, dirs []string) error {
	n := len(files) + len(dirs)
	if n <= 1 || inMemory(files, dirs) {
		var first error
		for _, f := range files {
			if err := f.Sync(); err != nil && first == nil {
				first = err
			}
		}
		for _, d := range dirs {
			if err := syncDir(d); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.Sync()
		}()
	}
	for i, d := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[len(files)+i] = syncDir(d)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// WriteFileAtomic replaces name with data by temp + fsync + rename in the
// same directory, keeping the mode of an existing file (perm otherwise), and
// syncs the directory so the rename is durable.
//
// When an existing file belongs to another user (smpatch run with sudo on
// a user's tree), the new file gets the same owner where permitted.
func WriteFileAtomic(name string, data []byte, perm os.FileMode) error {
	pf, err := renameio.NewPendingFile(name, renameio.WithTempDir(filepath.Dir(name)),
		renameio.WithPermissions(perm), renameio.WithExistingPermissions())
	if err != nil {
		return err
	}
	defer pf.Cleanup()
	if _, err := pf.Write(data); err != nil {
		return err
	}
	if st, err := os.Lstat(name); err == nil && st.Mode().IsRegular() {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
			_ = pf.Chown(int(sys.Uid), int(sys.Gid))
		}
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(name))
}

// SyncDir fsyncs a directory, making the entries renamed or created in it
// durable.
func SyncDir(dir string) error { return syncDir(dir) }

// syncDir opens, syncs and closes dir on its bare descriptor: an os.File
// would ask its flags with fcntl first (OpenNoPoll). A filesystem that
// cannot sync a directory (EINVAL) is not an error.
func syncDir(dir string) error {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(dir, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer syscall.Close(fd)
	for {
		err = syscall.Fsync(fd)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil && err != syscall.EINVAL {
		return &os.PathError{Op: "sync", Path: dir, Err: err}
	}
	return nil
}

// AbsPath maps a repository-relative path to its absolute path on disk,
// refusing paths that leave the tree (.., absolute, symlinks outside).
func (t *dirTree) AbsPath(rel string) (string, error) { return t.abs(rel) }

// OpenNoPoll is os.OpenFile for a file that is never waited on (a regular
// file or a directory, opened blocking): os.OpenFile offers every new
// descriptor to the runtime's poller, which on Linux costs four fcntl
// calls and an epoll_ctl that disk files refuse; os.NewFile asks one
// fcntl. Errors read as os.OpenFile's.
func OpenNoPoll(name string, flag int, perm os.FileMode) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// Rename is rename(2), the error an *os.LinkError as os.Rename's: without
// the Lstat of newpath os.Rename makes first to refuse replacing a
// directory, for callers that have just seen newpath be a regular file or
// missing (rename(2) refuses a file over a directory anyway, EISDIR).
func Rename(oldpath, newpath string) error {
	for {
		err := syscall.Rename(oldpath, newpath)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
		}
		return nil
	}
}

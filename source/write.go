package source

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Writing a tree: every file is written beside its target first (a
// temporary TempName, of a fixed length whatever the file's name), synced, then renamed over it, and the
// directories whose entries changed are synced. Every name goes through
// the tree's os.Root, so no write leaves the tree; none lands in .git or
// the journal directory either, even through a symlink of the tree.

// ReservedPath says why a repository-relative path is one smpatch never
// writes (a component that is .git or the journal directory, compared
// without case and trailing dots and spaces), or "".
func ReservedPath(rel string) string {
	for part := range strings.SplitSeq(rel, "/") {
		switch strings.ToLower(strings.TrimRight(part, ". ")) {
		case ".git":
			return "inside .git"
		case StateDirName:
			return "inside " + StateDirName
		}
	}
	return ""
}

// CheckPath refuses a repository-relative path that is not the tree's,
// leads outside it, or names (also through a symlink of the tree) a place
// inside .git or the journal directory, where smpatch never writes.
func (t *dirTree) CheckPath(rel string) error {
	if why := ReservedPath(rel); why != "" {
		return fmt.Errorf("%s: %s; smpatch never writes there", rel, why)
	}
	d, err := t.DiskPath(rel)
	if err != nil {
		return err
	}
	return t.checkLanding(d, rel)
}

// CheckWrites refuses, before anything is written, a set of
// repository-relative paths that could not all be written: a path that is
// not the tree's or leads outside it, one inside .git or the journal
// directory (also through a symlink), one that is not a regular file, and
// a file or directory that is read-only. Permission bits are honoured even
// for root: a file marked read-only is not ours to change.
func (t *dirTree) CheckWrites(rels []string) error {
	r, err := t.OpenRoot()
	if err != nil {
		return err
	}
	defer r.Close()
	for _, rel := range rels {
		if _, _, err := t.checkWrite(r, rel); err != nil {
			return err
		}
	}
	return nil
}

// checkWrite is CheckWrites of one path: its disk path, and its Lstat
// (nil when it does not exist).
func (t *dirTree) checkWrite(r *os.Root, rel string) (string, fs.FileInfo, error) {
	if err := t.CheckPath(rel); err != nil {
		return "", nil, err
	}
	d, err := t.DiskPath(rel)
	if err != nil {
		return "", nil, err
	}
	st, err := r.Lstat(d)
	switch {
	case err == nil:
		if !st.Mode().IsRegular() {
			return "", nil, fmt.Errorf("%s: not a regular file", rel)
		}
		p := filepath.Join(t.root, d)
		if st.Mode().Perm()&0o200 == 0 || syscall.Access(p, 2) != nil {
			return "", nil, fmt.Errorf("%s: file is read-only (mode %04o)", p, st.Mode().Perm())
		}
	case errors.Is(err, fs.ErrNotExist):
		st = nil
	default:
		return "", nil, treeError(rel, err)
	}
	// The nearest directory that exists must take new entries.
	for dir := filepath.Dir(d); ; dir = filepath.Dir(dir) {
		dst, err := r.Stat(dir)
		if err == nil {
			p := filepath.Join(t.root, dir)
			if !dst.IsDir() {
				return "", nil, fmt.Errorf("%s: not a directory", p)
			}
			if dst.Mode().Perm()&0o200 == 0 || syscall.Access(p, 2|1) != nil {
				return "", nil, fmt.Errorf("%s: directory is read-only (mode %04o)", p, dst.Mode().Perm())
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", nil, treeError(rel, err)
		}
		if dir == "." {
			break
		}
	}
	return d, st, nil
}

// checkLanding refuses a disk path whose directory, with the symlinks of
// the part of it that exists resolved, is inside the root's .git or
// journal directory. (A rename replaces a symlink at the file's own name;
// it never writes through it.)
func (t *dirTree) checkLanding(d, rel string) error {
	dir := filepath.Join(t.root, filepath.Dir(d))
	var rest []string
	for {
		if _, err := os.Lstat(dir); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		rest = append(rest, filepath.Base(dir))
		dir = parent
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil // os.Root refuses what cannot be resolved
	}
	for _, r := range slices.Backward(rest) {
		real = filepath.Join(real, r)
	}
	for _, name := range []string{".git", StateDirName} {
		res := filepath.Join(t.root, name)
		if real == res || strings.HasPrefix(real, res+string(filepath.Separator)) {
			return fmt.Errorf("%s: leads into %s; smpatch never writes there", rel, name)
		}
	}
	return nil
}

// WriteFiles writes each file (a nil value removes it) by temp + fsync +
// rename, keeping an existing file's mode and, where permitted, its owner,
// then syncs the directories that changed. Every path is checked before
// anything is written.
func (t *dirTree) WriteFiles(files map[string][]byte) error {
	keys := slices.Sorted(maps.Keys(files))
	pw, err := t.PrepareWrites(keys, files)
	if err != nil {
		return err
	}
	defer pw.Close()
	for i := range keys {
		if err := pw.Commit(i); err != nil {
			return err
		}
	}
	return pw.SyncDirs()
}

// PendingWrites is a set of tree files being written: PrepareWrites checks
// every path and writes each new content to a temporary file beside its
// target; Commit puts one file in place (sync and rename, or removal);
// SyncDirs syncs every directory whose entries changed. Until the first
// Commit the tree's files are unchanged (only the hidden temporary files
// exist beside them); Close removes the temporary files not committed and
// the directories made for them that stayed empty.
type PendingWrites struct {
	root  *os.Root
	items []*pendingWrite
	dirs  []string // root-relative directories whose entries change, each once
	made  []string // root-relative directories made for new files, outermost first
}

type pendingWrite struct {
	rel     string
	disk    string
	dir     *os.Root // the file's directory
	tmp     *os.File // the new content, at tmpName in dir; nil for a removal
	tmpName string
	name    string // the file's name in dir
	done    bool
}

// TempName is the name of a temporary file written beside the file
// called base: ".smpatch-" and 8 hex digits of base's hash, a random part
// and ".tmp", 38 bytes whatever base is (a temporary name that grew with
// base once failed for a file name of 255 bytes). IsTempOf recognises it.
func TempName(base string) string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return tempPrefix(base) + hex.EncodeToString(r[:]) + ".tmp"
}

func tempPrefix(base string) string {
	h := sha256.Sum256([]byte(base))
	return ".smpatch-" + hex.EncodeToString(h[:4]) + "-"
}

// IsTempOf reports whether name is a temporary file TempName made for the
// file called base.
func IsTempOf(name, base string) bool {
	rest, ok := strings.CutPrefix(name, tempPrefix(base))
	if !ok || len(rest) != 16+len(".tmp") || !strings.HasSuffix(rest, ".tmp") {
		return false
	}
	_, err := hex.DecodeString(strings.TrimSuffix(rest, ".tmp"))
	return err == nil
}

// createTemp makes a temporary file for base in dir, exclusively, with
// perm (before the umask, as a new file gets).
func createTemp(dir *os.Root, base string, perm fs.FileMode) (string, *os.File, error) {
	for range 100 {
		n := TempName(base)
		f, err := dir.OpenFile(n, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return n, f, err
	}
	return "", nil, fmt.Errorf("%s: no free temporary name beside it", base)
}

// PrepareWrites checks every path of rels (repository-relative, in the
// order Commit takes them, as CheckWrites does) and writes the temporary
// file of each one whose content in files is not nil. Nothing is synced
// or put in place yet.
func (t *dirTree) PrepareWrites(rels []string, files map[string][]byte) (_ *PendingWrites, err error) {
	r, err := t.OpenRoot()
	if err != nil {
		return nil, err
	}
	pw := &PendingWrites{root: r}
	defer func() {
		if err != nil {
			pw.Close()
		}
	}()
	seenDir := map[string]bool{}
	addDir := func(d string) {
		if !seenDir[d] {
			seenDir[d] = true
			pw.dirs = append(pw.dirs, d)
		}
	}
	for _, rel := range rels {
		d, st, err := t.checkWrite(r, rel)
		if err != nil {
			return nil, err
		}
		it := &pendingWrite{rel: rel, disk: d}
		pw.items = append(pw.items, it)
		dir := filepath.Dir(d)
		addDir(dir)
		data := files[rel]
		if data == nil {
			continue
		}
		made, err := mkdirAll(r, dir)
		pw.made = append(pw.made, made...)
		for _, m := range made {
			addDir(filepath.Dir(m)) // a directory made is durable once its parent is synced
		}
		if err != nil {
			return nil, treeError(rel, err)
		}
		if it.dir, err = r.OpenRoot(dir); err != nil {
			return nil, treeError(rel, err)
		}
		it.name = filepath.Base(d)
		// A new file gets 0644, an existing one keeps its mode: set on the
		// temporary file whatever the umask.
		var tmpName string
		if tmpName, it.tmp, err = createTemp(it.dir, it.name, 0o644); err != nil {
			return nil, treeError(rel, err)
		}
		it.tmpName = tmpName
		perm := fs.FileMode(0o644)
		if st != nil {
			perm = st.Mode().Perm()
		}
		if err := it.tmp.Chmod(perm); err != nil {
			return nil, err
		}
		if sys, ok := statOwner(st); ok && int(sys.Uid) != os.Geteuid() {
			// smpatch run with sudo on a user's tree: the file stays theirs.
			_ = it.tmp.Chown(int(sys.Uid), int(sys.Gid))
		}
		if _, err := it.tmp.Write(data); err != nil {
			return nil, err
		}
	}
	return pw, nil
}

func statOwner(st fs.FileInfo) (*syscall.Stat_t, bool) {
	if st == nil {
		return nil, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return sys, ok
}

// mkdirAll makes dir (root-relative) and its missing parents, and returns
// those it made, outermost first.
func mkdirAll(r *os.Root, dir string) ([]string, error) {
	var missing []string
	for d := dir; d != "."; d = filepath.Dir(d) {
		if _, err := r.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	var made []string
	for _, d := range slices.Backward(missing) {
		if err := r.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return made, err
		}
		made = append(made, d)
	}
	return made, nil
}

// Len is the number of files of the set.
func (pw *PendingWrites) Len() int { return len(pw.items) }

// Commit puts the i-th file in place: its temporary file is synced and
// renamed over it, or it is removed.
func (pw *PendingWrites) Commit(i int) error {
	it := pw.items[i]
	if it.done {
		return nil
	}
	it.done = true
	if it.tmp == nil {
		if err := pw.root.Remove(it.disk); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return treeError(it.rel, err)
		}
		return nil
	}
	err := it.tmp.Sync()
	if cerr := it.tmp.Close(); err == nil {
		err = cerr
	}
	it.tmp = nil
	if err == nil {
		err = it.dir.Rename(it.tmpName, it.name)
	}
	if err != nil {
		_ = it.dir.Remove(it.tmpName)
		return fmt.Errorf("writing %s: %w", it.rel, err)
	}
	return nil
}

// SyncDirs syncs every directory whose entries the set changed.
func (pw *PendingWrites) SyncDirs() error {
	for _, d := range pw.dirs {
		if err := syncDirIn(pw.root, d); err != nil {
			return err
		}
	}
	return nil
}

// syncDirIn fsyncs the directory d of r, making the entries renamed,
// created or removed in it durable. A file system that cannot sync a
// directory (EINVAL) is not an error.
func syncDirIn(r *os.Root, d string) error {
	f, err := r.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// Close removes the temporary files that were not committed and the
// directories made for them that stayed empty, and releases the tree.
func (pw *PendingWrites) Close() {
	for _, it := range pw.items {
		if it.tmp != nil {
			_ = it.tmp.Close()
			_ = it.dir.Remove(it.tmpName)
			it.tmp = nil
		}
		it.done = true
		if it.dir != nil {
			_ = it.dir.Close()
		}
	}
	for _, d := range slices.Backward(pw.made) {
		_ = pw.root.Remove(d) // fails, as it should, unless empty
	}
	pw.made = nil
	_ = pw.root.Close()
}

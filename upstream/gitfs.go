package upstream

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/smpatch/smpatch/internal/bounded"
)

// treeFS is one commit's tree as a read-only fs.FS, for readers written
// for a filesystem (probe.Static reads flashinfer's JIT gates and headers
// through it). Files are read from the object store when opened, at most
// maxTreeFile bytes each.
type treeFS struct {
	repo *git.Repository
	root *object.Tree
	when time.Time
}

// maxTreeFile bounds a file read through a treeFS.
const maxTreeFile = 64 << 20

func newTreeFS(repo *git.Repository, c *object.Commit) (*treeFS, error) {
	t, err := repo.TreeObject(c.TreeHash)
	if err != nil {
		return nil, err
	}
	return &treeFS{repo: repo, root: t, when: c.Committer.When}, nil
}

// entry finds name: the root's tree for ".".
func (f *treeFS) entry(op, name string) (*object.TreeEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return &object.TreeEntry{Name: ".", Mode: filemode.Dir, Hash: f.root.Hash}, nil
	}
	e, err := f.root.FindEntry(name)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return e, nil
}

func (f *treeFS) Open(name string) (fs.File, error) {
	e, err := f.entry("open", name)
	if err != nil {
		return nil, err
	}
	info := &treeInfo{name: path.Base(name), mode: e.Mode, when: f.when}
	if e.Mode == filemode.Dir {
		ents, err := f.ReadDir(name)
		if err != nil {
			return nil, err
		}
		return &treeDir{info: info, ents: ents}, nil
	}
	if !e.Mode.IsFile() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("not a file or directory")}
	}
	data, err := f.blob(e.Hash, name)
	if err != nil {
		return nil, err
	}
	info.size = int64(len(data))
	return &treeFile{info: info, r: bytes.NewReader(data)}, nil
}

func (f *treeFS) blob(h plumbing.Hash, name string) ([]byte, error) {
	b, err := f.repo.BlobObject(h)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if b.Size > maxTreeFile {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("larger than " + bounded.SizeText(maxTreeFile))}
	}
	r, err := b.Reader()
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	defer r.Close()
	data, err := bounded.ReadAll(r, maxTreeFile, "a blob larger than it said")
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return data, nil
}

func (f *treeFS) ReadFile(name string) ([]byte, error) {
	e, err := f.entry("read", name)
	if err != nil {
		return nil, err
	}
	if !e.Mode.IsFile() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("not a file")}
	}
	return f.blob(e.Hash, name)
}

func (f *treeFS) Stat(name string) (fs.FileInfo, error) {
	e, err := f.entry("stat", name)
	if err != nil {
		return nil, err
	}
	info := &treeInfo{name: path.Base(name), mode: e.Mode, when: f.when}
	if e.Mode.IsFile() {
		if info.size, err = f.repo.Storer.EncodedObjectSize(e.Hash); err != nil {
			return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
		}
	}
	return info, nil
}

func (f *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := f.entry("readdir", name)
	if err != nil {
		return nil, err
	}
	if e.Mode != filemode.Dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	t, err := f.repo.TreeObject(e.Hash)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	out := make([]fs.DirEntry, 0, len(t.Entries))
	for _, c := range t.Entries {
		info := &treeInfo{name: c.Name, mode: c.Mode, when: f.when, size: -1, fsys: f, hash: c.Hash}
		out = append(out, fs.FileInfoToDirEntry(info))
	}
	// git orders a directory "a" as "a/"; fs.ReadDir lists by name.
	sortDirEntries(out)
	return out, nil
}

// treeInfo is a tree entry's fs.FileInfo; a size of -1 is read when asked.
type treeInfo struct {
	name string
	mode filemode.FileMode
	when time.Time
	size int64
	fsys *treeFS
	hash plumbing.Hash
}

func (i *treeInfo) Name() string { return i.name }
func (i *treeInfo) Size() int64 {
	if i.size < 0 && i.fsys != nil && i.mode.IsFile() {
		if n, err := i.fsys.repo.Storer.EncodedObjectSize(i.hash); err == nil {
			i.size = n
		}
	}
	return max(i.size, 0)
}
func (i *treeInfo) Mode() fs.FileMode {
	switch i.mode {
	case filemode.Dir:
		return fs.ModeDir | 0o555
	case filemode.Symlink:
		return fs.ModeSymlink | 0o444
	case filemode.Executable:
		return 0o555
	case filemode.Regular, filemode.Deprecated:
		return 0o444
	}
	return fs.ModeIrregular
}
func (i *treeInfo) ModTime() time.Time { return i.when }
func (i *treeInfo) IsDir() bool        { return i.mode == filemode.Dir }
func (i *treeInfo) Sys() any           { return nil }

type treeFile struct {
	info *treeInfo
	r    *bytes.Reader
}

func (f *treeFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *treeFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *treeFile) Close() error               { return nil }

type treeDir struct {
	info *treeInfo
	ents []fs.DirEntry
	off  int
}

func (d *treeDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *treeDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: errors.New("is a directory")}
}
func (d *treeDir) Close() error { return nil }
func (d *treeDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.ents[d.off:]
	if n <= 0 {
		d.off = len(d.ents)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return rest[:n], nil
}

func sortDirEntries(es []fs.DirEntry) {
	slices.SortFunc(es, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
}

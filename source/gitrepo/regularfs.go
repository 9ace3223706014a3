package gitrepo

import (
	"fmt"
	"io/fs"
	"os"

	"github.com/go-git/go-billy/v5"

	"github.com/smpatch/smpatch/internal/bounded"
)

// regularFS is a git directory's file system as go-git reads it: every
// file it opens (a loose object, a pack and its index, a ref) must be a
// regular file, or a link to one, before it is opened; a named pipe or a
// device there is refused in one line naming it, where go-git would wait
// on it for good.
type regularFS struct{ billy.Filesystem }

func (r regularFS) check(name string) error {
	fi, err := r.Filesystem.Stat(name)
	if err != nil {
		return nil // absent: go-git says so when it opens it
	}
	if m := fi.Mode(); !m.IsRegular() && !m.IsDir() {
		return &fs.PathError{Op: "open", Path: r.Join(r.Root(), name), Err: fmt.Errorf("not a regular file (%s): git repository not read", bounded.Kind(m))}
	}
	return nil
}

func (r regularFS) Open(name string) (billy.File, error) {
	if err := r.check(name); err != nil {
		return nil, err
	}
	return r.Filesystem.Open(name)
}

func (r regularFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	if err := r.check(name); err != nil {
		return nil, err
	}
	return r.Filesystem.OpenFile(name, flag, perm)
}

func (r regularFS) Chroot(p string) (billy.Filesystem, error) {
	c, err := r.Filesystem.Chroot(p)
	if err != nil {
		return nil, err
	}
	return regularFS{c}, nil
}

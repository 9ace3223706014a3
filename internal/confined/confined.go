// Package confined writes files under one directory through an os.Root:
// nothing lands outside it (a symbolic link or ".." that leads out is
// refused), no file is written through a symbolic link found in it, and
// none into a named pipe or device found in it (one would block the open
// or swallow the bytes). It also walks a directory to refuse such entries
// before anything is written.
//
// It must not know what the files are.
package confined

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/smpatch/smpatch/internal/bounded"
)

// EntryError says that an entry of the directory is not what smpatch
// writes through: a symbolic link, a named pipe, a device, a socket.
type EntryError struct {
	Path string // the entry, as the directory's path joined with its name
	Kind string // "a symbolic link", "a named pipe", ...
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("%s is %s: smpatch writes no file through one (remove it, or choose another directory)", e.Path, e.Kind)
}

// check refuses name when it exists and is not a regular file; a missing
// name is fine.
func check(r *os.Root, name string) error {
	fi, err := r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().IsRegular() {
		return nil
	}
	kind := bounded.Kind(fi.Mode())
	if fi.Mode()&fs.ModeSymlink != 0 {
		kind = "a symbolic link"
	}
	return &EntryError{Path: filepath.Join(r.Name(), filepath.FromSlash(name)), Kind: kind}
}

// open opens name for writing with flag after refusing an entry that is
// not a regular file, and checks again what it opened: the open does not
// block (O_NONBLOCK), so a named pipe planted in between is refused too.
func open(r *os.Root, name string, flag int, perm fs.FileMode) (*os.File, error) {
	if err := check(r, name); err != nil {
		return nil, err
	}
	f, err := r.OpenFile(name, flag|syscall.O_NONBLOCK, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = &EntryError{Path: filepath.Join(r.Name(), filepath.FromSlash(name)), Kind: bounded.Kind(fi.Mode())}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Create opens name under r for writing, created or truncated.
func Create(r *os.Root, name string, perm fs.FileMode) (*os.File, error) {
	return open(r, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
}

// Append opens name under r for appending, created when missing.
func Append(r *os.Root, name string, perm fs.FileMode) (*os.File, error) {
	return open(r, name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, perm)
}

// MkdirAll makes the directory name under r and its parents.
func MkdirAll(r *os.Root, name string) error {
	return r.MkdirAll(name, 0o755)
}

// WriteFile replaces name under r with data atomically: a new file beside
// it, synced, renamed over it. An entry at name that is a symbolic link or
// a named pipe is replaced as a name, never written through.
func WriteFile(r *os.Root, name string, data []byte, perm fs.FileMode) error {
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Chmod(tmp, perm)
	}
	if err == nil {
		if fi, lerr := r.Lstat(name); lerr == nil && fi.IsDir() {
			err = fmt.Errorf("%s is a directory", filepath.Join(r.Name(), filepath.FromSlash(name)))
		}
	}
	if err == nil {
		err = r.Rename(tmp, name)
	}
	if err != nil {
		r.Remove(tmp)
		return err
	}
	return nil
}

// TooManyEntriesError says that a directory holds more entries than
// CheckTree walks.
type TooManyEntriesError struct {
	Dir string
	Max int
}

func (e *TooManyEntriesError) Error() string {
	return fmt.Sprintf("%s holds more than %d entries: not walked (choose another directory)", e.Dir, e.Max)
}

// CheckTree walks dir (not following links) and refuses the first entry
// that is not a regular file or a directory, and a tree of more than max
// entries.
func CheckTree(dir string, max int) error {
	n := 0
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > max {
			return &TooManyEntriesError{Dir: dir, Max: max}
		}
		switch t := d.Type(); {
		case t.IsDir() || t.IsRegular():
			return nil
		case t&fs.ModeSymlink != 0:
			return &EntryError{Path: p, Kind: "a symbolic link"}
		default:
			return &EntryError{Path: p, Kind: bounded.Kind(t)}
		}
	})
}

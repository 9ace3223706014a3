// Package bounded reads input from elsewhere with a bound: a regular file
// of at most so many bytes, opened without blocking, or a reader read to
// at most so many bytes. Every file smpatch reads that it did not write
// goes through here; the bound and what happens at it are the caller's
// and docs/security.md's.
package bounded

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ReadFile reads path from fsys (the local file system when nil): a
// regular file of at most max bytes, refused without reading it all when
// it is larger, and refused unread when it is not a regular file (a named
// pipe would block, a device never ends).
func ReadFile(fsys fs.FS, path string, max int) ([]byte, error) {
	var (
		f   io.ReadCloser
		err error
	)
	if fsys == nil {
		f, _, err = Open(path)
	} else if fi, serr := fs.Stat(fsys, path); serr == nil && !fi.Mode().IsRegular() {
		// An fs.FS cannot open without blocking: look first.
		return nil, notRegular(path, fi.Mode())
	} else {
		f, err = fsys.Open(path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, ok := f.(interface{ Stat() (fs.FileInfo, error) }); ok {
		fi, err := st.Stat()
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, notRegular(path, fi.Mode())
		}
	}
	return ReadAll(f, max, path)
}

// ReadAll reads r to its end, at most max bytes: more is an error naming
// what (a path, say) and the bound, and what was read is dropped.
func ReadAll(r io.Reader, max int, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > max {
		return nil, fmt.Errorf("%s: larger than %s: not read", what, SizeText(max))
	}
	return data, nil
}

// SizeText is max in MiB when it is a whole number of them, else in bytes.
func SizeText(max int) string {
	if max >= 1<<20 && max%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", max>>20)
	}
	return fmt.Sprintf("%d bytes", max)
}

// Open opens path for reading without blocking (a named pipe must
// not hang the open) and refuses it, closed, unless it is a regular file.
func Open(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, notRegular(path, fi.Mode())
	}
	return f, fi, nil
}

// notRegular refuses a named pipe, a device, a socket or a directory: a
// FIFO nobody writes to would block forever, a device never ends.
func notRegular(path string, m fs.FileMode) error {
	return fmt.Errorf("%s: not a regular file (%s): not read", path, Kind(m))
}

// Kind names what a file that is not regular is: "a named pipe", "a
// directory", "a character device"...
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a " + m.Type().String()
}

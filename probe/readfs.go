package probe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/ctxio"
)

// MaxSourceFile bounds the size of one text file the probe reads (Python
// sources, headers, distribution metadata, a saved report): flashinfer's
// largest is well under 1 MiB. A bigger file is reported, not read.
const MaxSourceFile = 4 << 20

// ErrNotRegular is wrapped by the error for a path that is a device, a
// named pipe or a socket: the probe reads regular files only.
var ErrNotRegular = errors.New("not a regular file")

// hostFS is the machine's filesystem from "/", opened the way a probe of
// untrusted trees must: without blocking on a named pipe (O_NONBLOCK), and
// refusing anything that is not a regular file or a directory after it is
// open (fstat), so a symlink to /dev/zero or a FIFO cannot hang the probe.
type hostFS struct{}

func (hostFS) full(op, name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return path.Join("/", name), nil
}

func (h hostFS) Open(name string) (fs.File, error) {
	p, err := h.full("open", name)
	if err != nil {
		return nil, err
	}
	return openRegular(p)
}

func (h hostFS) Stat(name string) (fs.FileInfo, error) {
	p, err := h.full("stat", name)
	if err != nil {
		return nil, err
	}
	return os.Stat(p)
}

func (h hostFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := h.full("readdir", name)
	if err != nil {
		return nil, err
	}
	return os.ReadDir(p)
}

// openRegular opens a regular file or a directory without blocking, and
// refuses everything else.
func openRegular(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if m := fi.Mode(); !m.IsRegular() && !m.IsDir() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: p, Err: fmt.Errorf("%w (%s)", ErrNotRegular, bounded.Kind(m))}
	}
	return f, nil
}

// boundedFS reads text files of fsys at most max bytes each, regular files
// only, and stops when ctx is done (the probe's --timeout, or a signal).
type boundedFS struct {
	fsys fs.FS
	ctx  context.Context
	max  int64
}

func (b boundedFS) Open(name string) (fs.File, error) {
	if err := b.ctx.Err(); err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return b.fsys.Open(name)
}

func (b boundedFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(b.fsys, name) }

func (b boundedFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := b.ctx.Err(); err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	return fs.ReadDir(b.fsys, name)
}

func (b boundedFS) ReadFile(name string) ([]byte, error) {
	if err := b.ctx.Err(); err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	fi, err := fs.Stat(b.fsys, name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w (%s)", ErrNotRegular, bounded.Kind(fi.Mode()))}
	}
	if fi.Size() > b.max {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%d bytes: larger than the %d bytes the probe reads of one file", fi.Size(), b.max)}
	}
	f, err := b.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have changed since Stat: Open checked it is regular
	// (hostFS), and no more than max bytes are read.
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: ErrNotRegular}
	}
	data, err := bounded.ReadAll(ctxio.Reader(b.ctx, f), int(b.max), "grew since it was looked at")
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return data, nil
}

// readHostFile reads a regular file of the host, at most max bytes, while
// ctx lasts (the probe's --timeout).
func readHostFile(ctx context.Context, p string, max int64) ([]byte, error) {
	return readBounded(ctx, p, "a file the probe reads", max)
}

// readBounded reads a regular file of the host, at most max bytes, while
// ctx lasts; what names the file's kind in the message ("a probe report").
func readBounded(ctx context.Context, p, what string, max int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, &fs.PathError{Op: "read", Path: p, Err: err}
	}
	f, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s: is a directory", p)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes: more than the %d bytes %s may have", p, fi.Size(), max, what)
	}
	return bounded.ReadAll(ctxio.Reader(ctx, f), int(max), p)
}

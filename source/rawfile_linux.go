package source

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rawFile is a file open for reading on its bare descriptor. os.NewFile
// (and os.Open) ask the descriptor's flags with fcntl and, for one opened
// O_NONBLOCK, offer it to the runtime's poller, which a disk file refuses
// with a failing epoll_ctl: two system calls per file, and the poller's
// own set-up on the first. A regular file is read with read(2) as it is.
type rawFile struct {
	fd   int
	name string
}

// OpenRead opens name with open(2) (flag is ORed with O_RDONLY and
// O_CLOEXEC), errors reading as os.OpenFile's. The file is meant for
// reading a regular file or a directory entry that is never waited on:
// Stat it first when it may be anything else.
func OpenRead(name string, flag int) (fs.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(name, flag|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return &rawFile{fd: fd, name: name}, nil
}

func (f *rawFile) Read(b []byte) (int, error) {
	if f.fd < 0 {
		return 0, os.ErrClosed
	}
	if len(b) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(f.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, &os.PathError{Op: "read", Path: f.name, Err: err}
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// ReadAt is pread(2).
func (f *rawFile) ReadAt(b []byte, off int64) (int, error) {
	done := 0
	for done < len(b) {
		n, err := unix.Pread(f.fd, b[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return done, &os.PathError{Op: "read", Path: f.name, Err: err}
		}
		if n == 0 {
			return done, io.EOF
		}
		done += n
	}
	return done, nil
}

func (f *rawFile) Close() error {
	if f.fd < 0 {
		return os.ErrClosed
	}
	err := unix.Close(f.fd)
	f.fd = -1
	if err != nil {
		return &os.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

func (f *rawFile) Stat() (fs.FileInfo, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(f.fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: f.name, Err: err}
	}
	return &rawStat{name: filepath.Base(f.name), sys: st}, nil
}

// rawStat is what os.File.Stat gives, from the same fstat(2).
type rawStat struct {
	name string
	sys  syscall.Stat_t
}

func (s *rawStat) Name() string       { return s.name }
func (s *rawStat) Size() int64        { return s.sys.Size }
func (s *rawStat) IsDir() bool        { return s.Mode().IsDir() }
func (s *rawStat) Sys() any           { return &s.sys }
func (s *rawStat) ModTime() time.Time { return time.Unix(s.sys.Mtim.Unix()) }

// Mode is os's conversion of st_mode (os/stat_linux.go).
func (s *rawStat) Mode() fs.FileMode {
	m := fs.FileMode(s.sys.Mode & 0o777)
	switch s.sys.Mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.sys.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.sys.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.sys.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

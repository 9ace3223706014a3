package source

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 is found missing (a kernel before 5.6, or
// a sandbox that refuses the call): every later open takes the other way.
var noOpenat2 atomic.Bool

// openBeneath opens the root-relative path rel for reading with the
// kernel resolving it: openat2 with RESOLVE_BENEATH fails, instead of
// opening anything, when a ".." or a symlink would leave root (an
// absolute symlink too, even one that points back inside). One call in
// place of an Lstat per path component, and no moment between the check
// and the open. done is false when it could not decide (the path leaves
// root, a symlink leads to a missing component, or the call is missing):
// the caller checks the path component by component and says why, as it
// always has.
func openBeneath(root, rel string) (f *os.File, done bool, err error) {
	fd, done, err := openBeneathFD(root, rel)
	if fd < 0 {
		return nil, done, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, rel)), true, nil
}

// openBeneathRaw is openBeneath giving the bare descriptor (rawFile).
func openBeneathRaw(root, rel string) (f fs.File, done bool, err error) {
	fd, done, err := openBeneathFD(root, rel)
	if fd < 0 {
		return nil, done, err
	}
	return &rawFile{fd: fd, name: filepath.Join(root, rel)}, true, nil
}

// openBeneathFD is openBeneath's work; fd is -1 unless a file was opened.
//
// The first walk refuses every symlink as well (RESOLVE_NO_SYMLINKS): in
// a tree without symlinks on the way it opens the file, or decides that
// it is missing, in one call: a component found missing before any
// symlink is missing however symlinks are followed. Only when that walk
// meets a symlink (or fails otherwise) is the path walked again with
// symlinks followed beneath root, and a file missing then is left to the
// check component by component, which names the symlink.
func openBeneathFD(root, rel string) (fd int, done bool, err error) {
	if noOpenat2.Load() {
		return -1, false, nil
	}
	dfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false, nil
	}
	defer unix.Close(dfd)
	how := unix.OpenHow{
		// O_NONBLOCK: opening a FIFO must not wait for a writer.
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	}
	open := func() (int, error) {
		for {
			fd, err := unix.Openat2(dfd, rel, &how)
			if err != unix.EINTR {
				return fd, err
			}
		}
	}
	fd, err = open()
	switch err {
	case nil:
		return fd, true, nil
	case unix.ENOENT:
		return -1, true, &os.PathError{Op: "open", Path: filepath.Join(root, rel), Err: syscall.ENOENT}
	case unix.ENOSYS, unix.EPERM:
		// EPERM: a seccomp filter that refuses calls it does not know
		// (the file's own permissions give EACCES).
		noOpenat2.Store(true)
		return -1, false, nil
	}
	how.Resolve = unix.RESOLVE_BENEATH
	if fd, err = open(); err == nil {
		return fd, true, nil
	}
	return -1, false, nil
}

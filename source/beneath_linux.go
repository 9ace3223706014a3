package source

import (
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
	if noOpenat2.Load() {
		return nil, false, nil
	}
	dfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, nil
	}
	defer unix.Close(dfd)
	how := unix.OpenHow{
		// O_NONBLOCK: opening a FIFO must not wait for a writer.
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH,
	}
	var fd int
	for {
		fd, err = unix.Openat2(dfd, rel, &how)
		if err != unix.EINTR {
			break
		}
	}
	switch err {
	case nil:
		return os.NewFile(uintptr(fd), filepath.Join(root, rel)), true, nil
	case unix.ENOENT:
		// Missing, and decided here when no symlink is on the way to the
		// missing component (the same walk with symlinks refused says
		// so): the check component by component would find none either,
		// and the open would fail the same way. A symlink on the way
		// leaves it to that check, which names it.
		how.Resolve |= unix.RESOLVE_NO_SYMLINKS
		if fd, err := unix.Openat2(dfd, rel, &how); err == unix.ENOENT {
			return nil, true, &os.PathError{Op: "open", Path: filepath.Join(root, rel), Err: syscall.ENOENT}
		} else if err == nil {
			unix.Close(fd) // it appeared meanwhile
		}
	case unix.ENOSYS, unix.EPERM:
		// EPERM: a seccomp filter that refuses calls it does not know
		// (the file's own permissions give EACCES).
		noOpenat2.Store(true)
	}
	return nil, false, nil
}

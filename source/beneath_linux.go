package source

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
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
// The file comes on its bare descriptor (rawFile).
func openBeneath(t *dirTree, rel string) (f fs.File, done bool, err error) {
	fd, done, err := openBeneathFD(t, rel)
	if fd < 0 {
		return nil, done, err
	}
	return &rawFile{fd: fd, name: filepath.Join(t.root, rel)}, true, nil
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
func openBeneathFD(t *dirTree, rel string) (fd int, done bool, err error) {
	if noOpenat2.Load() {
		return -1, false, nil
	}
	root := t.root
	dfd, release := t.held.dirFD(root)
	if dfd < 0 {
		return -1, false, nil
	}
	defer release()
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

// heldRoot is the tree's root opened O_PATH while the tree is held
// (HoldRoot): every open beneath it then starts from that descriptor
// instead of opening the root and closing it again each time.
type heldRoot struct {
	mu sync.RWMutex
	n  int // holds not released
	fd int // valid while n > 0 and fd >= 0
}

func (h *heldRoot) hold(root string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			fd = -1 // each open opens the root itself, as when not held
		}
		h.fd = fd
	}
	h.n++
}

func (h *heldRoot) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return
	}
	h.n--
	if h.n == 0 && h.fd >= 0 {
		unix.Close(h.fd)
		h.fd = -1
	}
}

// dirFD gives a descriptor of root to resolve beneath, and what to call
// once done with it; -1 when root cannot be opened.
func (h *heldRoot) dirFD(root string) (int, func()) {
	h.mu.RLock()
	if h.n > 0 && h.fd >= 0 {
		return h.fd, h.mu.RUnlock
	}
	h.mu.RUnlock()
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil
	}
	return fd, func() { unix.Close(fd) }
}

package source

import (
	"os"

	"golang.org/x/sys/unix"
)

// inMemory reports whether every file and directory given is on a
// filesystem held in memory (tmpfs, ramfs), where fsync returns without
// waiting for a device. Anything it cannot tell counts as a disk.
func inMemory(files []*os.File, dirs []string) bool {
	var st unix.Statfs_t
	for _, f := range files {
		rc, err := f.SyscallConn()
		if err != nil {
			return false
		}
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), &st) }); err != nil || serr != nil || !memoryFS(int64(st.Type)) {
			return false
		}
	}
	for _, d := range dirs {
		if err := unix.Statfs(d, &st); err != nil || !memoryFS(int64(st.Type)) {
			return false
		}
	}
	return true
}

func memoryFS(t int64) bool { return t == unix.TMPFS_MAGIC || t == unix.RAMFS_MAGIC }

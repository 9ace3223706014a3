package source

import (
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// inMemory reports whether every file and directory given is on a
// filesystem held in memory (tmpfs, ramfs), where fsync returns without
// waiting for a device. Anything it cannot tell counts as a disk.
//
// A file is judged by its directory (the files synced are ones smpatch
// has just created, never a mount point), and each directory's answer is
// kept for the process: one statfs per directory however many syncs. The
// answer only chooses between syncing one after another and syncing
// together; either is as durable.
func inMemory(files []*os.File, dirs []string) bool {
	for _, f := range files {
		if !dirInMemory(filepath.Dir(f.Name())) {
			return false
		}
	}
	for _, d := range dirs {
		if !dirInMemory(d) {
			return false
		}
	}
	return true
}

var memoryDirs sync.Map // directory → bool (on a filesystem in memory)

func dirInMemory(d string) bool {
	if v, ok := memoryDirs.Load(d); ok {
		return v.(bool)
	}
	var st unix.Statfs_t
	in := unix.Statfs(d, &st) == nil && memoryFS(int64(st.Type))
	memoryDirs.Store(d, in)
	return in
}

func memoryFS(t int64) bool { return t == unix.TMPFS_MAGIC || t == unix.RAMFS_MAGIC }

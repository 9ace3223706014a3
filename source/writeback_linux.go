package source

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing f's dirty pages to disk
// without waiting (sync_file_range SYNC_FILE_RANGE_WRITE). It promises
// nothing about durability: the fsync that follows does.
func startWriteback(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	})
}

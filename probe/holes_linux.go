package probe

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// nextData is the offset of the first byte at or after off that is not in
// a hole of f (lseek SEEK_DATA); ok is false when the filesystem cannot
// say. A file with nothing but holes past off gives its size.
func nextData(f *os.File, off, size int64) (int64, bool) {
	d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO):
		return size, true
	case err != nil:
		return 0, false
	}
	return d, true
}

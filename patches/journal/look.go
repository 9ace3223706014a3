package journal

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"

	"github.com/smpatch/smpatch/source"
)

// What stands at a journaled path. A patched file may have become
// something else since (a named pipe, a directory, a symlink to another
// file of the tree): reading through it would block, fail the whole
// command, or show the bytes of the file it points to as this one's.

// Look is what is at the tree file rel now: the hash of its bytes ("" when
// it is absent) when it is a regular file, else what it is instead, for
// people ("replaced by a symlink", "not a regular file: fifo"), with no
// hash. It reads nothing else: no symlink at rel is followed.
func Look(t source.WritableTree, rel string) (hash, other string, err error) {
	d, err := t.DiskPath(rel)
	if err != nil {
		return "", "", err
	}
	r, err := t.OpenRoot()
	if err != nil {
		return "", "", err
	}
	defer r.Close()
	st, err := r.Lstat(d)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		// A parent that is not a directory (a file in its place): the
		// file is not there.
		if errors.Is(err, errNotDir) {
			return "", "not a regular file: a parent is not a directory", nil
		}
		// A parent replaced by a symlink out of the tree (os.Root's
		// error has no exported value).
		if strings.Contains(err.Error(), "path escapes from parent") {
			return "", "leads outside the tree through a symlink", nil
		}
		return "", "", err
	}
	if w := NotRegular(st.Mode()); w != "" {
		return "", w, nil
	}
	b, err := ReadCurrent(t, rel)
	if err != nil {
		return "", "", err
	}
	return Hash(b), "", nil
}

// NotRegular says what a file of mode m is when it is not a regular file
// ("" when it is): "replaced by a symlink", "not a regular file: fifo".
func NotRegular(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return ""
	case t&fs.ModeSymlink != 0:
		return "replaced by a symlink"
	case t&fs.ModeDir != 0:
		return "not a regular file: directory"
	case t&fs.ModeNamedPipe != 0:
		return "not a regular file: fifo"
	case t&fs.ModeSocket != 0:
		return "not a regular file: socket"
	case t&fs.ModeDevice != 0:
		return "not a regular file: device"
	default:
		return "not a regular file"
	}
}

var errNotDir error = syscall.ENOTDIR

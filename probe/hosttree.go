package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/ctxio"
)

// maxSysFile bounds one /sys or /proc file the probe reads: a PCI config
// space is 4096 bytes, an attribute a line, /proc/driver/nvidia/params a
// few dozen lines.
const maxSysFile = 64 << 10

// hostTree reads a /sys or /proc tree confined to its root (os.Root: no
// link leads out of it), regular files only, opened without blocking and
// read to at most maxSysFile bytes while ctx lasts. Names are slash paths
// relative to the root; errors name the file as base/name ("/sys/...").
type hostTree struct {
	root *os.Root
	base string // what the root is called in evidence: "/sys", "/proc" or the directory given
	ctx  context.Context
}

// openHostTree opens dir as a tree shown as base.
func openHostTree(ctx context.Context, dir, base string) (*hostTree, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &hostTree{root: r, base: base, ctx: ctx}, nil
}

func (t *hostTree) close() {
	if t != nil {
		t.root.Close()
	}
}

// show is how name is written in evidence and errors.
func (t *hostTree) show(name string) string { return path.Join(t.base, name) }

// read reads the regular file name, at most max bytes.
func (t *hostTree) read(name string, max int) ([]byte, error) {
	if err := t.ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: not read: %w", t.show(name), err)
	}
	f, err := t.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, t.pathErr(name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, t.pathErr(name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", t.show(name), ErrNotRegular, bounded.Kind(fi.Mode()))
	}
	data, err := bounded.ReadAll(ctxio.Reader(t.ctx, f), max, t.show(name))
	switch {
	case err != nil && t.ctx.Err() != nil:
		return nil, fmt.Errorf("%s: not read: %w", t.show(name), t.ctx.Err())
	case err != nil && strings.HasPrefix(err.Error(), t.show(name)+": "):
		return nil, err // the bound, naming the file already
	case err != nil:
		return nil, t.pathErr(name, err)
	}
	return data, nil
}

// line reads name and returns its first line, trimmed.
func (t *hostTree) line(name string) (string, error) {
	data, err := t.read(name, 4096)
	if err != nil {
		return "", err
	}
	s, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(s), nil
}

// readDir lists the directory name, at most maxDirEntries entries.
func (t *hostTree) readDir(name string) ([]string, error) {
	if err := t.ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: not read: %w", t.show(name), err)
	}
	// O_DIRECTORY: a named pipe in a directory's place fails, not blocks.
	f, err := t.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, t.pathErr(name, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(maxDirEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, t.pathErr(name, err)
	}
	if len(names) > maxDirEntries {
		return nil, fmt.Errorf("%s: more than %d entries: not read", t.show(name), maxDirEntries)
	}
	return names, nil
}

// maxDirEntries bounds a directory the probe lists (/sys/bus/pci/devices
// has a few hundred entries on a large host).
const maxDirEntries = 1 << 16

// readlink reads the link name.
func (t *hostTree) readlink(name string) (string, error) {
	if err := t.ctx.Err(); err != nil {
		return "", fmt.Errorf("%s: not read: %w", t.show(name), err)
	}
	s, err := t.root.Readlink(name)
	if err != nil {
		return "", t.pathErr(name, err)
	}
	return s, nil
}

// resolve is the root-relative path the link name points to, for a link
// relative to its directory (as every link of /sys is) or absolute under
// the tree's base.
func (t *hostTree) resolve(name string) (string, error) {
	target, err := t.readlink(name)
	if err != nil {
		return "", err
	}
	var p string
	if path.IsAbs(target) {
		rel, ok := strings.CutPrefix(target, strings.TrimSuffix(t.base, "/")+"/")
		if !ok {
			return "", fmt.Errorf("%s: links to %s, outside %s", t.show(name), clip(target, 120), t.base)
		}
		p = path.Clean(rel)
	} else {
		p = path.Join(path.Dir(name), target)
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("%s: links to %s, outside %s", t.show(name), clip(target, 120), t.base)
	}
	return p, nil
}

// pathErr names the file in base terms, whatever os.Root called it.
func (t *hostTree) pathErr(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if strings.Contains(err.Error(), "escapes from parent") {
		// os.Root refuses a link out of the tree (to /dev/zero, say).
		return fmt.Errorf("%s: links outside %s: %w", t.show(name), t.base, err)
	}
	return fmt.Errorf("%s: %w", t.show(name), err)
}

package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/ctxio"
)

// Reading file bytes: a file's layer is streamed (verified) to the file;
// small files of the same package met on the way are kept, so reading a
// project's sources costs one pass over its layer. Big files stream.

const (
	defaultCacheBytes = 64 << 20
	maxCachedFile     = 1 << 20
	// MaxReadFile bounds a file read whole; bigger ones are opened and
	// streamed (fs.FS Open).
	MaxReadFile = 256 << 20
)

// fileCache keeps the bytes of files read, within a budget.
type fileCache struct {
	mu  sync.Mutex
	m   map[string][]byte
	n   int64
	max int64
}

func (c *fileCache) get(name string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[name]
	return b, ok
}

// put keeps b (a prefetched file, already held by the index).
func (c *fileCache) put(name string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += int64(len(b)) - int64(len(c.m[name]))
	c.m[name] = b
}

func (c *fileCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n -= int64(len(c.m[name]))
	delete(c.m, name)
}

// room reports whether a file of size bytes would be kept.
func (c *fileCache) room(name string, size int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, have := c.m[name]
	return !have && size <= maxCachedFile && c.n+size <= c.max
}

// offer keeps b when it is small and the budget has room.
func (c *fileCache) offer(name string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[name]; ok || int64(len(b)) > maxCachedFile || c.n+int64(len(b)) > c.max {
		return
	}
	c.m[name] = b
	c.n += int64(len(b))
}

// walkLayer streams layer i's tar, calling fn for each entry until fn returns
// false or the layer ends. The rest of the layer is then read to verify its
// digests: an error from fn, or a mismatch, is returned.
func (f *FS) walkLayer(i int, fn func(h *tar.Header, r io.Reader) (bool, error)) error {
	rc, err := f.openLayer(i)
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if derr := rc.Drain(); derr != nil {
				return derr
			}
			return fmt.Errorf("reading layer %s: %w", f.layerName(i), err)
		}
		more, err := fn(h, tr)
		if err != nil {
			if derr := rc.Drain(); derr != nil {
				return derr
			}
			return err
		}
		if !more {
			break
		}
	}
	return rc.Drain()
}

// openLayer opens layer i's uncompressed tar stream, verified against its
// digests when the FS has them, and stopped by the FS's context.
func (f *FS) openLayer(i int) (*verifiedStream, error) {
	if err := f.ctx.Err(); err != nil {
		return nil, err
	}
	l := f.layers[i]
	var s *verifiedStream
	if f.checks == nil {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, fmt.Errorf("opening layer %s: %w", f.layerName(i), err)
		}
		s = &verifiedStream{Reader: rc, closers: []io.Closer{rc}}
	} else {
		var err error
		if s, err = openVerified(l, f.checks[i]); err != nil {
			return nil, err
		}
	}
	s.Reader = ctxio.Reader(f.ctx, s.Reader)
	return s, nil
}

func (f *FS) layerName(i int) string {
	if f.checks != nil {
		return f.checks[i].name()
	}
	if d, err := f.layers[i].Digest(); err == nil {
		return d.String()
	}
	return "(unknown digest)"
}

func (f *FS) countPass(i int) {
	f.mu.Lock()
	f.reads[i]++
	f.mu.Unlock()
}

// readEntry is the bytes of the regular file (or hard link) e at name.
func (f *FS) readEntry(name string, e *entry) ([]byte, error) {
	if b, ok := f.cache.get(name); ok {
		return bytes.Clone(b), nil
	}
	layer, src, seq := e.layer, name, e.seq
	switch e.typ {
	case tar.TypeReg:
	case tar.TypeLink:
		if e.srcLayer < 0 {
			return nil, fs.ErrNotExist
		}
		layer, src, seq = e.srcLayer, e.src, e.srcSeq
	default:
		return nil, fmt.Errorf("not a regular file")
	}
	if e.size > MaxReadFile {
		return nil, fmt.Errorf("%d bytes, more than the %s read whole (open it to stream it)", e.size, bounded.SizeText(MaxReadFile))
	}
	b, ok, err := f.scanFor(layer, src, seq, name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("entry vanished from layer %s", f.layerName(layer))
	}
	return b, nil
}

// scanFor streams layer i until it finds the regular file want, and returns
// its bytes; on the way it caches small visible files of the same package
// (so reading a project's sources costs one pass). key is the name the
// caller asked for, cached with the bytes.
func (f *FS) scanFor(i int, want string, wantSeq int, key string) ([]byte, bool, error) {
	f.countPass(i)
	group := packageGroup(want)
	var found []byte
	ok := false
	// Entries of a name seen so far: a name given twice in a layer is its
	// last entry (FS knows which by its seq).
	count := map[string]int{}
	err := f.walkLayer(i, func(h *tar.Header, r io.Reader) (bool, error) {
		name := cleanName(h.Name)
		inGroup := group != "" && strings.HasPrefix(name, group)
		if ok && !inGroup {
			return false, nil // found, and past its package: stop
		}
		seq := -1
		if name == want || inGroup {
			seq = count[name]
			count[name]++
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeRegA {
			return true, nil
		}
		if name == want && seq == wantSeq {
			b, err := bounded.ReadAll(r, MaxReadFile, name)
			if err != nil {
				return false, err
			}
			found, ok = b, true
			f.cache.offer(key, bytes.Clone(b))
			return true, nil
		}
		if !inGroup || !f.visibleAt(name, i, seq) || !f.cache.room(name, h.Size) {
			return true, nil
		}
		b, err := bounded.ReadAll(r, maxCachedFile, name)
		if err != nil {
			return false, err
		}
		f.cache.offer(name, b)
		return true, nil
	})
	return found, ok, err
}

// visibleAt reports whether the entry seq of name in layer i is the
// regular file the FS shows at name.
func (f *FS) visibleAt(name string, i, seq int) bool {
	e, ok := f.entries[name]
	return ok && e.layer == i && e.typ == tar.TypeReg && e.seq == seq
}

// packageGroup is the prefix of the files read together with name: the
// top-level package directory under site-packages (or the dist-info
// directory), or the name's own directory elsewhere.
func packageGroup(name string) string {
	parts := strings.Split(name, "/")
	for k, c := range parts {
		if (c == "site-packages" || c == "dist-packages") && k+2 < len(parts) {
			return strings.Join(parts[:k+2], "/") + "/"
		}
	}
	if j := strings.LastIndexByte(name, '/'); j >= 0 {
		return name[:j+1]
	}
	return ""
}

// openStream opens layer i and positions a tar reader at the regular file
// name (its entry seq).
func (f *FS) openStream(i int, name string, seq int) (*streamFile, error) {
	f.countPass(i)
	rc, err := f.openLayer(i)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(rc)
	n := 0
	for {
		h, err := tr.Next()
		if err != nil {
			derr := rc.Drain()
			rc.Close()
			if derr != nil {
				return nil, derr
			}
			if err == io.EOF {
				return nil, fmt.Errorf("entry vanished from layer %s", f.layerName(i))
			}
			return nil, fmt.Errorf("reading layer %s: %w", f.layerName(i), err)
		}
		if cleanName(h.Name) != name {
			continue
		}
		if n++; n-1 == seq && (h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeRegA) {
			return &streamFile{r: tr, s: rc}, nil
		}
	}
}

// streamFile is a big file read straight from its layer's tar stream. Its
// end is reported only once the rest of the layer has been read and its
// digests verified.
type streamFile struct {
	r    io.Reader
	s    *verifiedStream
	info *fileInfo
}

func (s *streamFile) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err == io.EOF {
		if derr := s.s.Drain(); derr != nil {
			return n, derr
		}
	}
	return n, err
}
func (s *streamFile) Stat() (fs.FileInfo, error) { return s.info, nil }
func (s *streamFile) Close() error               { return s.s.Close() }

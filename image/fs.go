package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"runtime"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// FS is a read-only view of an image's merged filesystem, built by streaming
// each layer's tar once, from the top layer down, honouring whiteouts
// (".wh.NAME") and opaque directories (".wh..wh..opq"). Nothing is flattened
// to disk and no layer is held in memory: FS keeps an index of entry
// metadata (paths, types, modes, sizes, the layer each visible entry comes
// from) and reads a file's bytes by re-opening its layer. Small files near a
// file read (the same package in the same layer) are kept in a bounded cache,
// so reading a project's sources costs one pass over its layer.
//
// Paths are slash-separated and relative to the image root ("usr/lib/...").
// FS implements fs.FS, fs.ReadFileFS, fs.ReadDirFS and fs.StatFS.
type FS struct {
	layers  []v1.Layer
	checks  []layerCheck        // per layer: the digests its streams must match (nil: unchecked, tests only)
	ctx     context.Context     // stops every layer stream (a signal)
	entries map[string]*entry   // visible entries by cleaned path
	dirs    map[string][]string // directory -> sorted child names
	keep    func(name string, typ byte) bool
	cache   fileCache

	mu    sync.Mutex
	reads []int // per layer: passes made to read files (for tests and stats)
}

type entry struct {
	layer int
	typ   byte
	mode  fs.FileMode // permission bits only
	size  int64
	link  string // symlink target as written, or hardlink target (cleaned)
	seq   int    // earlier entries of the same name in its layer
	// A hard link's bytes: the regular file entry (src, srcSeq) of layer
	// srcLayer it resolves to.
	src      string
	srcSeq   int
	srcLayer int
}

func (e *entry) isDir() bool { return e.typ == tar.TypeDir }

// FSOptions tune how much of an image FS indexes and caches.
type FSOptions struct {
	// Keep decides which non-directory entries are indexed; directories,
	// symlinks and whiteouts are always indexed. Nil means DefaultKeep.
	Keep func(name string, typ byte) bool
	// CacheBytes bounds the bytes of file contents kept after reads
	// (default 64 MiB; files over 1 MiB are never kept beyond one read).
	CacheBytes int64
	// IndexCache is a directory keeping each layer's entry list by the
	// digest the layer is verified against, so a base's multi-GB layers
	// are streamed once, not on every build ("" for none;
	// DefaultIndexCache is smpatch's).
	IndexCache string

	// diffOnly: the layers are stored uncompressed (a docker-save
	// tarball); verify them against the config's diff ids only.
	diffOnly bool
}

// NewFS indexes img's layers: each layer's tar is streamed once (several
// layers at a time) into a list of the entries smpatch needs, or that list
// is read from the index cache (FSOptions.IndexCache, keyed by the layer's
// digest); the lists are then merged top-down, honouring whiteouts. ctx
// stops the indexing and every later read of the FS (a signal).
func NewFS(ctx context.Context, img v1.Image, opts FSOptions) (*FS, error) {
	if err := checkImage(img); err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("reading image layers: %w", err)
	}
	if !opts.diffOnly {
		if err := verifyConfig(img); err != nil {
			return nil, err
		}
	}
	checks, err := layerChecks(img, len(layers), opts.diffOnly)
	if err != nil {
		return nil, err
	}
	// Cache keys are the digests each layer is verified against when it
	// is streamed, so an entry list is only ever written for the bytes
	// its key names.
	var keys []string
	if opts.IndexCache != "" {
		for _, c := range checks {
			keys = append(keys, c.cacheKey())
		}
	}
	return newFS(ctx, layers, checks, keys, opts)
}

// newFS indexes layers (bottom first); keys, when given, key the index
// cache. Up to four layers stream at once: a cold index of a multi-GB
// base is bound by decompression, one core per layer.
func newFS(ctx context.Context, layers []v1.Layer, checks []layerCheck, keys []string, opts FSOptions) (*FS, error) {
	f := &FS{
		ctx:     ctx,
		layers:  layers,
		checks:  checks,
		reads:   make([]int, len(layers)),
		entries: map[string]*entry{},
		keep:    opts.Keep,
		cache:   fileCache{m: map[string][]byte{}, max: opts.CacheBytes},
	}
	cacheDir := opts.IndexCache
	if f.keep == nil {
		f.keep = DefaultKeep
	} else {
		cacheDir = "" // the cache holds DefaultKeep's selection only
	}
	if len(keys) != len(layers) {
		cacheDir = ""
	}
	if f.cache.max <= 0 {
		f.cache.max = defaultCacheBytes
	}
	lists := make([][]rawEntry, len(layers))
	errs := make([]error, len(layers))
	sem := make(chan struct{}, max(1, min(runtime.GOMAXPROCS(0), 4)))
	var wg sync.WaitGroup
	for i := range layers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			key := ""
			if cacheDir != "" {
				key = keys[i]
			}
			lists[i], errs[i] = f.scanLayer(ctx, i, cacheDir, key)
		}()
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		return nil, err
	}
	if err := f.merge(lists); err != nil {
		return nil, err
	}
	return f, nil
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Exists reports whether name is a visible entry of the image (without
// following a final symlink). Only indexed entries are known (FSOptions.Keep).
func (f *FS) Exists(name string) bool {
	_, ok := f.entries[cleanName(name)]
	return ok
}

// IsDir reports whether name is a directory in the image, following symlinks.
func (f *FS) IsDir(name string) bool {
	n, e, err := f.resolve(cleanName(name), true)
	_ = n
	return err == nil && e.isDir()
}

// Glob lists the visible paths in dir (not following symlinks) whose base
// name matches pattern (path.Match syntax), sorted.
func (f *FS) Glob(dir, pattern string) []string {
	dir = cleanName(dir)
	var out []string
	for _, c := range f.dirs[dir] {
		if ok, _ := path.Match(pattern, c); ok {
			out = append(out, path.Join(dir, c))
		}
	}
	return out
}

// SitePackages lists the directories named site-packages or dist-packages
// in the image, roughly in the order an interpreter in it would search
// them: virtual environments and conda first, then /usr/local, then
// /usr/lib.
func (f *FS) SitePackages() []string {
	var out []string
	for n, e := range f.entries {
		b := path.Base(n)
		if (b == "site-packages" || b == "dist-packages") && e.isDir() {
			out = append(out, n)
		}
	}
	return rankSitePackages(out)
}

// LayerPasses is how many times each layer (bottom first) was re-opened
// to read file bytes after indexing.
func (f *FS) LayerPasses() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.reads...)
}

const maxSymlinks = 40

// resolve follows symlinks in every component of name (and in the last one
// when follow is set) and returns the final path and its entry.
func (f *FS) resolve(name string, follow bool) (string, *entry, error) {
	hops := 0
	var walk func(name string, follow bool) (string, *entry, error)
	walk = func(name string, follow bool) (string, *entry, error) {
		if name == "" {
			return "", &entry{layer: -1, typ: tar.TypeDir, mode: 0o755}, nil
		}
		parts := strings.Split(name, "/")
		cur := ""
		for k, p := range parts {
			next := path.Join(cur, p)
			e, ok := f.entries[next]
			if !ok {
				return "", nil, fs.ErrNotExist
			}
			last := k == len(parts)-1
			if e.typ == tar.TypeSymlink && (!last || follow) {
				hops++
				if hops > maxSymlinks {
					return "", nil, fmt.Errorf("too many symlinks at %s", next)
				}
				target := e.link
				if !strings.HasPrefix(target, "/") {
					target = path.Join(cur, target)
				}
				rest := strings.Join(parts[k+1:], "/")
				return walk(cleanName(path.Join(target, rest)), follow)
			}
			if !last && !e.isDir() {
				return "", nil, fs.ErrNotExist
			}
			cur = next
			if last {
				return cur, e, nil
			}
		}
		return "", nil, fs.ErrNotExist
	}
	return walk(name, follow)
}

func (f *FS) lookup(op, name string) (string, *entry, error) {
	if !fs.ValidPath(name) {
		return "", nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		name = ""
	}
	n, e, err := f.resolve(name, true)
	if err != nil {
		return "", nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return n, e, nil
}

// ReadFile reads a regular file's bytes from its layer (or the cache).
func (f *FS) ReadFile(name string) ([]byte, error) {
	n, e, err := f.lookup("read", name)
	if err != nil {
		return nil, err
	}
	if e.isDir() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	b, err := f.readEntry(n, e)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return b, nil
}

// Open implements fs.FS.
func (f *FS) Open(name string) (fs.File, error) {
	n, e, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	info := &fileInfo{name: path.Base(name), e: e}
	if name == "." {
		info.name = "."
	}
	if e.isDir() {
		return &dirFile{fs: f, path: n, info: info}, nil
	}
	if e.typ == tar.TypeReg && e.size > maxCachedFile {
		// A big file (a shared library the probe scans) streams from its
		// layer instead of being read into memory.
		if _, cached := f.cache.get(n); !cached {
			sf, err := f.openStream(e.layer, n, e.seq)
			if err != nil {
				return nil, &fs.PathError{Op: "open", Path: name, Err: err}
			}
			info.size = e.size
			sf.info = info
			return sf, nil
		}
	}
	b, err := f.readEntry(n, e)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	info.size = int64(len(b))
	return &file{Reader: bytes.NewReader(b), info: info}, nil
}

// Stat implements fs.StatFS.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	_, e, err := f.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	base := path.Base(name)
	return &fileInfo{name: base, e: e, size: e.size}, nil
}

// ReadDir implements fs.ReadDirFS.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, e, err := f.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !e.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return f.readDir(n), nil
}

func (f *FS) readDir(dir string) []fs.DirEntry {
	kids := f.dirs[dir]
	out := make([]fs.DirEntry, 0, len(kids))
	for _, c := range kids {
		e := f.entries[path.Join(dir, c)]
		out = append(out, fs.FileInfoToDirEntry(&fileInfo{name: c, e: e, size: e.size}))
	}
	return out
}

type fileInfo struct {
	name string
	e    *entry
	size int64
}

func (i *fileInfo) Name() string { return i.name }
func (i *fileInfo) Size() int64  { return i.size }
func (i *fileInfo) Mode() fs.FileMode {
	switch i.e.typ {
	case tar.TypeDir:
		return fs.ModeDir | i.e.mode
	case tar.TypeSymlink:
		return fs.ModeSymlink | i.e.mode
	}
	return i.e.mode
}
func (i *fileInfo) ModTime() time.Time { return time.Time{} }
func (i *fileInfo) IsDir() bool        { return i.e.isDir() }
func (i *fileInfo) Sys() any           { return nil }

type file struct {
	*bytes.Reader
	info *fileInfo
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *file) Close() error               { return nil }

type dirFile struct {
	fs   *FS
	path string
	info *fileInfo
	list []fs.DirEntry
	pos  int
	read bool
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dirFile) Close() error               { return nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.path, Err: errors.New("is a directory")}
}

func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.read {
		d.list, d.read = d.fs.readDir(d.path), true
	}
	rest := d.list[d.pos:]
	if n <= 0 {
		d.pos = len(d.list)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if n > len(rest) {
		n = len(rest)
	}
	d.pos += n
	return rest[:n], nil
}

// openStream opens layer i and positions a tar reader at the regular file
// name.

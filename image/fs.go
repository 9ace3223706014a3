package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/renameio/v2"

	"github.com/smpatch/smpatch/internal/ctxio"
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

	mu         sync.Mutex
	cache      map[string][]byte
	cacheBytes int64
	cacheMax   int64
	reads      []int // per layer: passes made to read files (for tests and stats)
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

// DefaultIndexCache is $XDG_CACHE_HOME/smpatch/image-index (or the
// platform's user cache directory); "" when there is none.
func DefaultIndexCache() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "smpatch", "image-index")
}

// indexCacheVersion changes whenever rawEntry or DefaultKeep changes.
const indexCacheVersion = "3"

type indexCacheFile struct {
	Version string     `json:"version"`
	Layer   string     `json:"layer"`
	Entries []rawEntry `json:"entries"`
}

func readIndexCache(dir, key string) ([]rawEntry, bool) {
	b, err := os.ReadFile(filepath.Join(dir, key+".json"))
	if err != nil {
		return nil, false
	}
	var c indexCacheFile
	if json.Unmarshal(b, &c) != nil || c.Version != indexCacheVersion || c.Layer != key {
		return nil, false
	}
	return c.Entries, true
}

// writeIndexCache stores a layer's list; a cache that cannot be written
// only costs the next build a pass over the layer.
func writeIndexCache(dir, key string, list []rawEntry) {
	b, err := json.Marshal(indexCacheFile{Version: indexCacheVersion, Layer: key, Entries: list})
	if err != nil {
		return
	}
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	_ = renameio.WriteFile(filepath.Join(dir, key+".json"), b, 0o644)
}

// DefaultKeep indexes what smpatch reads in an image: everything under a
// site-packages or dist-packages directory, and any path with a component
// naming sglang or flashinfer (editable installs and source checkouts such
// as /sgl-workspace/sglang), plus /etc/smpatch.
func DefaultKeep(name string, typ byte) bool {
	if strings.HasPrefix(name, "etc/smpatch/") {
		return true
	}
	for _, c := range strings.Split(name, "/") {
		if c == "site-packages" || c == "dist-packages" ||
			strings.Contains(c, "sglang") || strings.Contains(c, "flashinfer") {
			return true
		}
	}
	return false
}

const (
	defaultCacheBytes = 64 << 20
	maxCachedFile     = 1 << 20
	maxReadFile       = 256 << 20
)

// NewFS indexes img's layers: each layer's tar is streamed once (several
// layers at a time) into a list of the entries smpatch needs, or that list
// is read from the index cache (FSOptions.IndexCache, keyed by the layer's
// digest); the lists are then merged top-down, honouring whiteouts. ctx
// stops the indexing and every later read of the FS (a signal).
func NewFS(ctx context.Context, img v1.Image, opts FSOptions) (*FS, error) {
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
// cache.
func newFS(ctx context.Context, layers []v1.Layer, checks []layerCheck, keys []string, opts FSOptions) (*FS, error) {
	f := &FS{
		ctx:      ctx,
		layers:   layers,
		checks:   checks,
		reads:    make([]int, len(layers)),
		entries:  map[string]*entry{},
		keep:     opts.Keep,
		cache:    map[string][]byte{},
		cacheMax: opts.CacheBytes,
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
	if f.cacheMax <= 0 {
		f.cacheMax = defaultCacheBytes
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
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	whiteouts := map[string]bool{} // paths removed by an upper layer
	opaques := map[string]bool{}   // directories made opaque by an upper layer
	for i := len(layers) - 1; i >= 0; i-- {
		lw, lo := f.mergeLayer(i, lists[i], whiteouts, opaques)
		lists[i] = nil
		for p := range lw {
			whiteouts[p] = true
		}
		for p := range lo {
			opaques[p] = true
		}
	}
	f.resolveLinks()
	f.buildDirs()
	return f, nil
}

// cleanName turns a tar entry name into an FS path ("" for the root).
func cleanName(name string) string {
	name = path.Clean("/" + name)
	return strings.TrimPrefix(name, "/")
}

// rawEntry is one tar entry of a layer as the index keeps it: directories,
// symlinks, whiteouts, and the regular files and hard links Keep selects.
type rawEntry struct {
	Name string `json:"n"`
	Typ  byte   `json:"t"`
	Mode uint32 `json:"m,omitempty"`
	Size int64  `json:"s,omitempty"`
	Link string `json:"l,omitempty"`
	// Seq counts the earlier entries of the same name in the layer (a
	// later one replaces them).
	Seq int `json:"q,omitempty"`
	// Same marks a hard link to an earlier regular file of its own layer,
	// entry (Link, LinkSeq); Size and Mode are that file's.
	Same    bool `json:"sm,omitempty"`
	LinkSeq int  `json:"lq,omitempty"`
	// Data holds the bytes of the small files every lookup of a Python
	// environment reads (prefetched), so finding distributions and
	// editable installs costs no further pass over a big layer.
	Data []byte `json:"d,omitempty"`
}

const maxPrefetch = 64 << 10

// prefetched names the small files kept while a layer is indexed:
// distribution metadata, PEP 610 direct_url.json, .pth and .egg-link files.
func prefetched(name string) bool {
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if strings.HasSuffix(dir, ".dist-info") || strings.HasSuffix(dir, ".egg-info") {
		return base == "METADATA" || base == "PKG-INFO" || base == "direct_url.json"
	}
	return strings.HasSuffix(base, ".pth") || strings.HasSuffix(base, ".egg-link")
}

// scanLayer lists layer i's entries, from the index cache when it has them.
func (f *FS) scanLayer(ctx context.Context, i int, cacheDir, key string) ([]rawEntry, error) {
	if key != "" {
		if list, ok := readIndexCache(cacheDir, key); ok {
			return list, nil
		}
	}
	var list []rawEntry
	type seen struct {
		n    int // entries of this name so far
		reg  bool
		size int64
		mode uint32
		src  string // the regular file a hard link resolves to
		seq  int
	}
	names := map[string]*seen{}
	err := f.walkLayer(i, func(h *tar.Header, r io.Reader) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		name := cleanName(h.Name)
		if name == "" {
			return true, nil
		}
		if err := checkWhiteoutName(name); err != nil {
			return false, fmt.Errorf("layer %s: %w", f.layerName(i), err)
		}
		re := rawEntry{Name: name, Typ: h.Typeflag, Mode: uint32(fs.FileMode(h.Mode) & fs.ModePerm), Size: h.Size}
		base := path.Base(name)
		switch {
		case strings.HasPrefix(base, ".wh..wh.") && base != opaqueWhiteout:
			return true, nil // aufs metadata (.wh..wh.plnk, ...): not part of the tree
		case strings.HasPrefix(base, ".wh."):
			re = rawEntry{Name: name, Typ: tar.TypeReg}
		case h.Typeflag == tar.TypeDir:
			re.Size = 0
		case h.Typeflag == tar.TypeSymlink:
			re.Link, re.Size = h.Linkname, 0
		case h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeRegA:
			re.Typ = tar.TypeReg
			if !f.keep(name, tar.TypeReg) {
				return true, nil
			}
			if h.Size <= maxPrefetch && prefetched(name) {
				b, err := io.ReadAll(r)
				if err != nil {
					return false, fmt.Errorf("reading %s: %w", name, err)
				}
				re.Data = b
			}
		case h.Typeflag == tar.TypeLink:
			re.Link, re.Size = cleanName(h.Linkname), 0
			if !f.keep(name, tar.TypeLink) {
				return true, nil
			}
			// A hard link names an earlier entry of the archive: when that
			// is a regular file of this layer, the link has its bytes.
			if t := names[re.Link]; t != nil && t.reg {
				re.Same, re.Size, re.Mode = true, t.size, t.mode
				re.Link, re.LinkSeq = t.src, t.seq
			}
		default:
			return true, nil // devices, fifos: nothing smpatch reads
		}
		sn := names[name]
		if sn == nil {
			sn = &seen{}
			names[name] = sn
		}
		re.Seq = sn.n
		sn.n++
		sn.reg = false
		switch {
		case re.Typ == tar.TypeReg && !strings.HasPrefix(base, ".wh."):
			sn.reg, sn.size, sn.mode, sn.src, sn.seq = true, re.Size, re.Mode, name, re.Seq
		case re.Same:
			sn.reg, sn.size, sn.mode, sn.src, sn.seq = true, re.Size, re.Mode, re.Link, re.LinkSeq
		}
		list = append(list, re)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if key != "" {
		writeIndexCache(cacheDir, key, list)
	}
	return list, nil
}

// mergeLayer adds layer i's entries that the layers above leave visible,
// and returns the layer's own whiteouts and opaque directories (which apply
// to the layers below it).
func (f *FS) mergeLayer(i int, list []rawEntry, whiteouts, opaques map[string]bool) (map[string]bool, map[string]bool) {
	layerWh := map[string]bool{}
	layerOpq := map[string]bool{}
	for _, re := range list {
		name := re.Name
		dir, base := path.Split(name)
		dir = strings.TrimSuffix(dir, "/")
		if base == opaqueWhiteout {
			layerOpq[dir] = true
			continue
		}
		if strings.HasPrefix(base, ".wh.") {
			layerWh[path.Join(dir, strings.TrimPrefix(base, ".wh."))] = true
			continue
		}
		if f.hidden(name, i, whiteouts, opaques) {
			continue
		}
		if old, ok := f.entries[name]; ok && old.layer != i {
			continue // an upper layer has it
		}
		e := &entry{layer: i, typ: re.Typ, mode: fs.FileMode(re.Mode), size: re.Size, link: re.Link, seq: re.Seq, srcLayer: -1}
		if re.Same {
			e.src, e.srcSeq, e.srcLayer = re.Link, re.LinkSeq, i
		}
		f.entries[name] = e
		if re.Data != nil {
			f.cache[name] = re.Data
			f.cacheBytes += int64(len(re.Data))
		} else if old, ok := f.cache[name]; ok {
			// A later entry of the same layer replaced a prefetched one.
			delete(f.cache, name)
			f.cacheBytes -= int64(len(old))
		}
	}
	return layerWh, layerOpq
}

const opaqueWhiteout = ".wh..wh..opq"

// checkWhiteoutName refuses entry names that would make a whiteout hide
// something other than one named entry: ".wh.", ".wh.." and ".wh..." (they
// would whiteout the directory itself or its parent), and ".wh." names used
// as directories.
func checkWhiteoutName(name string) error {
	parts := strings.Split(name, "/")
	for k, c := range parts {
		if !strings.HasPrefix(c, ".wh.") {
			continue
		}
		if k < len(parts)-1 {
			return fmt.Errorf("entry %q: a whiteout name used as a directory", name)
		}
		switch strings.TrimPrefix(c, ".wh.") {
		case "", ".", "..":
			return fmt.Errorf("entry %q: a whiteout that names no file", name)
		}
	}
	return nil
}

// resolveLinks gives each visible hard link the regular file whose bytes it
// has: an earlier file of its own layer (found while indexing), else the
// file of that name a lower layer shows through every layer from the
// link's up. A link that resolves to nothing (its target hidden, for
// instance by an opaque directory of the same layer) is not part of the
// filesystem.
func (f *FS) resolveLinks() {
	var links []string
	for n, e := range f.entries {
		if e.typ == tar.TypeLink {
			links = append(links, n)
		}
	}
	sort.Slice(links, func(a, b int) bool {
		ea, eb := f.entries[links[a]], f.entries[links[b]]
		if ea.layer != eb.layer {
			return ea.layer < eb.layer
		}
		return links[a] < links[b]
	})
	for _, n := range links {
		e := f.entries[n]
		if e.srcLayer >= 0 {
			continue
		}
		t, ok := f.entries[e.link]
		switch {
		case ok && t.layer < e.layer && t.typ == tar.TypeReg:
			e.src, e.srcSeq, e.srcLayer = e.link, t.seq, t.layer
			e.size, e.mode = t.size, t.mode
		case ok && t.layer < e.layer && t.typ == tar.TypeLink && t.srcLayer >= 0:
			e.src, e.srcSeq, e.srcLayer = t.src, t.srcSeq, t.srcLayer
			e.size, e.mode = t.size, t.mode
		default:
			delete(f.entries, n)
			if b, ok := f.cache[n]; ok {
				delete(f.cache, n)
				f.cacheBytes -= int64(len(b))
			}
		}
	}
}

// hidden reports whether a lower-layer entry is hidden by the layers above
// layer i: a whiteout of it or of a parent, an opaque parent, or a parent
// that an upper layer replaced with a non-directory.
func (f *FS) hidden(name string, i int, whiteouts, opaques map[string]bool) bool {
	if whiteouts[name] {
		return true
	}
	for p := name; ; {
		j := strings.LastIndexByte(p, '/')
		if j < 0 {
			p = ""
		} else {
			p = p[:j]
		}
		if p == "" {
			return opaques[""]
		}
		if whiteouts[p] || opaques[p] {
			return true
		}
		if e, ok := f.entries[p]; ok && e.layer > i && !e.isDir() {
			return true
		}
	}
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
// digests when the FS has them.
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
	return layerName(f.layers[i])
}

func layerName(l v1.Layer) string {
	if d, err := l.Digest(); err == nil {
		return d.String()
	}
	return "(unknown digest)"
}

func (f *FS) buildDirs() {
	children := map[string]map[string]bool{}
	add := func(name string) {
		for name != "" {
			dir, base := path.Split(name)
			dir = strings.TrimSuffix(dir, "/")
			if children[dir] == nil {
				children[dir] = map[string]bool{}
			}
			if children[dir][base] {
				return
			}
			children[dir][base] = true
			if _, ok := f.entries[dir]; !ok && dir != "" {
				f.entries[dir] = &entry{layer: -1, typ: tar.TypeDir, mode: 0o755}
			}
			name = dir
		}
	}
	names := make([]string, 0, len(f.entries))
	for n := range f.entries {
		names = append(names, n)
	}
	for _, n := range names {
		add(n)
	}
	f.dirs = make(map[string][]string, len(children))
	for d, m := range children {
		list := make([]string, 0, len(m))
		for c := range m {
			list = append(list, c)
		}
		sort.Strings(list)
		f.dirs[d] = list
	}
	for n, e := range f.entries {
		if e.isDir() && f.dirs[n] == nil {
			f.dirs[n] = []string{}
		}
	}
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

// ReadFiles reads several files, one pass per layer involved. Files that
// do not exist are left out of the result.
func (f *FS) ReadFiles(names []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, name := range names {
		b, err := f.ReadFile(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

func (f *FS) readEntry(name string, e *entry) ([]byte, error) {
	f.mu.Lock()
	if b, ok := f.cache[name]; ok {
		f.mu.Unlock()
		return bytes.Clone(b), nil
	}
	f.mu.Unlock()
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
	if e.size > maxReadFile {
		return nil, fmt.Errorf("%d bytes: too large to read whole (open it to stream it)", e.size)
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
	f.mu.Lock()
	f.reads[i]++
	f.mu.Unlock()
	group := packageGroup(want)
	var found []byte
	ok := false
	// Entries of a name seen so far: a name given twice in a layer is its
	// last entry (FS knows which by its seq).
	count := map[string]int{}
	err := f.walkLayer(i, func(h *tar.Header, r io.Reader) (bool, error) {
		name := cleanName(h.Name)
		if ok && (group == "" || !strings.HasPrefix(name, group)) {
			return false, nil // found, and past its package: stop
		}
		seq := -1
		if name == want || (group != "" && strings.HasPrefix(name, group)) {
			seq = count[name]
			count[name]++
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeRegA {
			return true, nil
		}
		if name == want && seq == wantSeq {
			if h.Size > maxReadFile {
				return false, fmt.Errorf("%d bytes: too large to read whole", h.Size)
			}
			b, err := io.ReadAll(r)
			if err != nil {
				return false, fmt.Errorf("reading %s: %w", name, err)
			}
			found, ok = b, true
			f.store(key, bytes.Clone(b))
			return true, nil
		}
		if group == "" || h.Size > maxCachedFile || !strings.HasPrefix(name, group) {
			return true, nil
		}
		if e, vis := f.entries[name]; !vis || e.layer != i || e.typ != tar.TypeReg || e.seq != seq {
			return true, nil
		}
		f.mu.Lock()
		_, have := f.cache[name]
		room := f.cacheBytes+h.Size <= f.cacheMax
		f.mu.Unlock()
		if have || !room {
			return true, nil
		}
		b, err := io.ReadAll(r)
		if err != nil {
			return false, fmt.Errorf("reading %s: %w", name, err)
		}
		f.store(name, b)
		return true, nil
	})
	return found, ok, err
}

func (f *FS) store(name string, b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.cache[name]; ok || int64(len(b)) > maxCachedFile || f.cacheBytes+int64(len(b)) > f.cacheMax {
		return
	}
	f.cache[name] = b
	f.cacheBytes += int64(len(b))
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
		f.mu.Lock()
		_, cached := f.cache[n]
		f.mu.Unlock()
		if !cached {
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
func (f *FS) openStream(i int, name string, seq int) (*streamFile, error) {
	f.mu.Lock()
	f.reads[i]++
	f.mu.Unlock()
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

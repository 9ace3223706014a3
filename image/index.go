package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/smpatch/smpatch/internal/bounded"
)

// The index: each layer's tar is streamed once into the list of entries
// smpatch may read (rawEntry), kept in the index cache by the digest the
// layer is verified against, and the lists are merged top-down.

// MaxEntries bounds the entries indexed from one image (a real CUDA and
// PyTorch base has a few hundred thousand).
const MaxEntries = 4 << 20

var maxEntries = MaxEntries // tests lower it

// maxIndexCacheFile bounds a cached entry list read back.
const maxIndexCacheFile = 1 << 30

// indexCacheVersion changes whenever rawEntry or DefaultKeep changes.
const indexCacheVersion = "3"

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

type indexCacheFile struct {
	Version string     `json:"version"`
	Layer   string     `json:"layer"`
	Entries []rawEntry `json:"entries"`
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

func readIndexCache(dir, key string) ([]rawEntry, bool) {
	b, err := bounded.ReadFile(nil, filepath.Join(dir, key+".json"), maxIndexCacheFile)
	if err != nil {
		return nil, false
	}
	return parseIndexCache(b, key)
}

// parseIndexCache reads a cached entry list, refusing one that is not
// what scanLayer writes for the layer key: a list a damaged or foreign
// cache file holds costs a pass over the layer, never a wrong tree.
func parseIndexCache(b []byte, key string) ([]rawEntry, bool) {
	var c indexCacheFile
	if json.Unmarshal(b, &c) != nil || c.Version != indexCacheVersion || c.Layer != key || len(c.Entries) > maxEntries {
		return nil, false
	}
	for _, e := range c.Entries {
		if e.Name == "" || cleanName(e.Name) != e.Name || checkWhiteoutName(e.Name) != nil || e.Size < 0 || e.Seq < 0 || e.LinkSeq < 0 || len(e.Data) > maxPrefetch {
			return nil, false
		}
		switch e.Typ {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
		case tar.TypeLink:
			if e.Link == "" || cleanName(e.Link) != e.Link {
				return nil, false
			}
		default:
			return nil, false
		}
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

// maxPrefetch bounds a prefetched file, maxPrefetchLayer all of one
// layer's (past it, files are read by a pass over the layer).
const (
	maxPrefetch      = 64 << 10
	maxPrefetchLayer = 32 << 20
)

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

const opaqueWhiteout = ".wh..wh..opq"

// cleanName turns a tar entry name into an FS path ("" for the root).
func cleanName(name string) string {
	name = path.Clean("/" + name)
	return strings.TrimPrefix(name, "/")
}

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

// scanLayer lists layer i's entries, from the index cache when it has them.
func (f *FS) scanLayer(ctx context.Context, i int, cacheDir, key string) ([]rawEntry, error) {
	if key != "" {
		if list, ok := readIndexCache(cacheDir, key); ok {
			return list, nil
		}
	}
	var l layerList
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
		if len(l.list) == maxEntries {
			return false, fmt.Errorf("layer %s: more than %d entries to index", f.layerName(i), maxEntries)
		}
		return true, l.add(name, h, r, f.keep)
	})
	if err != nil {
		return nil, err
	}
	if key != "" {
		writeIndexCache(cacheDir, key, l.list)
	}
	return l.list, nil
}

// layerList gathers one layer's entries in the order of its tar.
type layerList struct {
	list     []rawEntry
	names    map[string]*seenName
	prefetch int64 // bytes prefetched
}

// seenName is what a layer said so far of one name.
type seenName struct {
	n    int // entries of this name so far
	reg  bool
	size int64
	mode uint32
	src  string // the regular file a hard link resolves to
	seq  int
}

// add records the entry h (its bytes in r) when the index keeps it.
func (l *layerList) add(name string, h *tar.Header, r io.Reader, keep func(string, byte) bool) error {
	if l.names == nil {
		l.names = map[string]*seenName{}
	}
	re := rawEntry{Name: name, Typ: h.Typeflag, Mode: uint32(fs.FileMode(h.Mode) & fs.ModePerm), Size: h.Size}
	base := path.Base(name)
	switch {
	case strings.HasPrefix(base, ".wh..wh.") && base != opaqueWhiteout:
		return nil // aufs metadata (.wh..wh.plnk, ...): not part of the tree
	case strings.HasPrefix(base, ".wh."):
		re = rawEntry{Name: name, Typ: tar.TypeReg}
	case h.Typeflag == tar.TypeDir:
		re.Size = 0
	case h.Typeflag == tar.TypeSymlink:
		re.Link, re.Size = h.Linkname, 0
	case h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeRegA:
		re.Typ = tar.TypeReg
		if !keep(name, tar.TypeReg) {
			return nil
		}
		if h.Size <= maxPrefetch && l.prefetch+h.Size <= maxPrefetchLayer && prefetched(name) {
			b, err := bounded.ReadAll(r, maxPrefetch, name)
			if err != nil {
				return fmt.Errorf("reading %s: %w", name, err)
			}
			re.Data = b
			l.prefetch += int64(len(b))
		}
	case h.Typeflag == tar.TypeLink:
		re.Link, re.Size = cleanName(h.Linkname), 0
		if !keep(name, tar.TypeLink) {
			return nil
		}
		// A hard link names an earlier entry of the archive: when that
		// is a regular file of this layer, the link has its bytes.
		if t := l.names[re.Link]; t != nil && t.reg {
			re.Same, re.Size, re.Mode = true, t.size, t.mode
			re.Link, re.LinkSeq = t.src, t.seq
		}
	default:
		return nil // devices, fifos: nothing smpatch reads
	}
	sn := l.names[name]
	if sn == nil {
		sn = &seenName{}
		l.names[name] = sn
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
	l.list = append(l.list, re)
	return nil
}

// merge builds the visible tree from the layers' lists (bottom first),
// top-down: an upper layer's entry, whiteout or opaque directory hides
// what the layers below have at that path.
func (f *FS) merge(lists [][]rawEntry) error {
	whiteouts := map[string]bool{} // paths removed by an upper layer
	opaques := map[string]bool{}   // directories made opaque by an upper layer
	for i := len(lists) - 1; i >= 0; i-- {
		lw, lo := f.mergeLayer(i, lists[i], whiteouts, opaques)
		lists[i] = nil
		for p := range lw {
			whiteouts[p] = true
		}
		for p := range lo {
			opaques[p] = true
		}
		if len(f.entries) > maxEntries {
			return fmt.Errorf("more than %d entries to index", maxEntries)
		}
	}
	f.resolveLinks()
	f.buildDirs()
	return nil
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
			f.cache.put(name, re.Data)
		} else {
			f.cache.drop(name) // a later entry of the same layer replaced a prefetched one
		}
	}
	return layerWh, layerOpq
}

// hidden reports whether layer i's entry name is hidden by the layers
// above: whited out or under an opaque directory, or under a parent
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
		}
	}
}

// buildDirs lists every directory's children, adding the parents no
// layer gave an entry of their own.
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

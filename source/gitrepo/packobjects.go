package gitrepo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/smpatch/smpatch/internal/lru"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/hash"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// packObjects reads objects straight from a repository's pack files, for a
// walk that inflates many revisions of the same files: go-git's packfile
// scanner inflates each entry and its PatchDelta applies deltas, and every
// object resolved is kept per (pack, offset) up to a byte budget, so that
// the next revision of a file, a delta on one just read, costs one small
// inflate and one copy. (go-git's own object cache is keyed by object hash,
// so it hashes every delta base it resolves, a full SHA-1 with collision
// detection of each revision along each delta chain.) Safe for concurrent
// use: packs are read with ReadAt.
type packObjects struct {
	packs []*packFile

	mu    sync.Mutex
	cache *lru.Cache[packKey, packItem] // resolved blobs, by bytes
	other *lru.Cache[packKey, packItem] // resolved trees, commits and tags
}

type packFile struct {
	idx  *idxfile.MemoryIndex
	f    billy.File
	size int64
	scan sync.Pool // of *packfile.Scanner
}

type packKey struct {
	pack int
	off  int64
}

type packItem struct {
	typ  plumbing.ObjectType
	data []byte
}

// maxDeltaDepth bounds a delta chain (git writes at most 50 by default); a
// longer one, or a loop of ref-deltas, is a broken pack.
const maxDeltaDepth = 4096

// maxObjectBytes bounds one object the walk reads from a pack, as the pack
// declares it and as it inflates or a delta builds it: the trees, commits
// and source files a check reads are far smaller, and a hostile pack (a
// small entry that inflates to gigabytes, deltas that copy their base over
// and over) must not take the machine's memory.
const maxObjectBytes = 64 << 20

// errNotPacked is the answer for an object that no pack of the repository
// holds (a loose object, or one behind an alternate): read it through
// go-git.
var errNotPacked = errors.New("object not in a pack")

// openPackObjects opens the pack files of the object store st and of the
// alternate object directories it reads (see OpenGitStorage), or returns
// nil when the store is not on a file system or has no packs. File
// contents are kept up to maxBytes, other objects (trees, commits, tags) up
// to otherBytes, apart, so that a walk's trees do not push the revisions of
// its files out.
func openPackObjects(st storage.Storer, maxBytes, otherBytes int64) *packObjects {
	var stores []*filesystem.Storage
	switch s := st.(type) {
	case *filesystem.Storage:
		stores = append(stores, s)
	case *withAlternates:
		stores = append(append(stores, s.Storage), s.alts...)
	default:
		return nil
	}
	po := &packObjects{cache: lru.New[packKey, packItem](maxBytes), other: lru.New[packKey, packItem](otherBytes)}
	for _, s := range stores {
		fs := s.Filesystem()
		dir := fs.Join("objects", "pack")
		infos, err := fs.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fi := range infos {
			name, ok := strings.CutSuffix(fi.Name(), ".idx")
			if !ok || !strings.HasPrefix(name, "pack-") {
				continue
			}
			p, err := openPackFile(fs, fs.Join(dir, name))
			if err != nil {
				continue // go-git reads what is there, or reports the error
			}
			po.packs = append(po.packs, p)
		}
	}
	if len(po.packs) == 0 {
		return nil
	}
	return po
}

func openPackFile(fs billy.Filesystem, base string) (*packFile, error) {
	fi, err := fs.Open(base + ".idx")
	if err != nil {
		return nil, err
	}
	defer fi.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(fi).Decode(idx); err != nil {
		return nil, fmt.Errorf("%s.idx: %w", base, err)
	}
	idx.CRC32 = nil // not read: 4 bytes an object
	f, err := fs.Open(base + ".pack")
	if err != nil {
		return nil, err
	}
	st, err := fs.Stat(base + ".pack")
	if err != nil {
		f.Close()
		return nil, err
	}
	return &packFile{idx: idx, f: f, size: st.Size()}, nil
}

// close closes the pack files and lets the indexes and what was kept go:
// a handle that still reads through po reads through go-git.
func (po *packObjects) close() {
	if po == nil {
		return
	}
	po.mu.Lock()
	defer po.mu.Unlock()
	for _, p := range po.packs {
		p.f.Close()
	}
	po.packs = nil
	po.cache.Clear()
	po.other.Clear()
}

// list is the packs open.
func (po *packObjects) list() []*packFile {
	po.mu.Lock()
	defer po.mu.Unlock()
	return po.packs
}

// object returns the type and contents of the object h. The contents are
// shared: read them only. errNotPacked when no pack holds h.
func (po *packObjects) object(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	for i, p := range po.list() {
		off, ok := p.offset(h)
		if !ok {
			continue
		}
		return po.at(packKey{i, off}, 0)
	}
	return plumbing.InvalidObject, nil, errNotPacked
}

// has reports whether a pack holds h.
func (po *packObjects) has(h plumbing.Hash) bool {
	for _, p := range po.list() {
		if _, ok := p.offset(h); ok {
			return true
		}
	}
	return false
}

// offset is where the pack holds h, looked up in the index as go-git's
// MemoryIndex.FindOffset does, but without its reverse map: FindOffset
// remembers every offset it has answered, under a lock, so a long walk
// would grow a map towards one entry for every object of the pack.
func (p *packFile) offset(h plumbing.Hash) (int64, bool) {
	idx := p.idx
	k := idx.FanoutMapping[h[0]]
	if k < 0 || k >= len(idx.Names) || k >= len(idx.Offset32) {
		return 0, false
	}
	names, offs := idx.Names[k], idx.Offset32[k]
	n := min(len(names)/hash.Size, len(offs)/4)
	i, ok := sort.Find(n, func(i int) int { return bytes.Compare(h[:], names[i*hash.Size:(i+1)*hash.Size]) })
	if !ok {
		return 0, false
	}
	o := binary.BigEndian.Uint32(offs[i*4:])
	if o&(1<<31) == 0 {
		return int64(o), true
	}
	j := 8 * int(o&^(1<<31))
	if j+8 > len(idx.Offset64) {
		return 0, false // a broken index: go-git says so
	}
	return int64(binary.BigEndian.Uint64(idx.Offset64[j:])), true
}

// at resolves the entry at k, its delta bases first.
func (po *packObjects) at(k packKey, depth int) (plumbing.ObjectType, []byte, error) {
	if typ, data, ok := po.get(k); ok {
		return typ, data, nil
	}
	if depth > maxDeltaDepth {
		return plumbing.InvalidObject, nil, fmt.Errorf("pack entry at %d: delta chain longer than %d", k.off, maxDeltaDepth)
	}
	ps := po.list()
	if k.pack >= len(ps) {
		return plumbing.InvalidObject, nil, errNotPacked // closed
	}
	p := ps[k.pack]
	hdr, raw, err := p.entry(k.off)
	if err != nil {
		return plumbing.InvalidObject, nil, err
	}
	var typ plumbing.ObjectType
	var data []byte
	switch hdr.Type {
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
		typ, data = hdr.Type, raw
	case plumbing.OFSDeltaObject, plumbing.REFDeltaObject:
		base := packKey{k.pack, hdr.OffsetReference}
		if hdr.Type == plumbing.REFDeltaObject {
			var ok bool
			if base.off, ok = p.offset(hdr.Reference); !ok {
				// A thin pack's base in another pack: not written by
				// go-git's fetch, left to go-git.
				return plumbing.InvalidObject, nil, errNotPacked
			}
		}
		var src []byte
		if typ, src, err = po.at(base, depth+1); err != nil {
			return plumbing.InvalidObject, nil, err
		}
		if data, err = applyDelta(src, raw); err != nil {
			return plumbing.InvalidObject, nil, fmt.Errorf("pack entry at %d: %w", k.off, err)
		}
	default:
		return plumbing.InvalidObject, nil, fmt.Errorf("pack entry at %d: type %v", k.off, hdr.Type)
	}
	po.put(k, typ, data)
	return typ, data, nil
}

// entry reads the header and the inflated bytes (an object, or a delta) of
// the entry at off.
func (p *packFile) entry(off int64) (*packfile.ObjectHeader, []byte, error) {
	r := io.NewSectionReader(p.f, 0, p.size)
	s, _ := p.scan.Get().(*packfile.Scanner)
	if s == nil {
		s = packfile.NewScanner(r)
	} else {
		s.Reset(r)
	}
	defer p.scan.Put(s)
	hdr, err := s.SeekObjectHeader(off)
	if err != nil {
		return nil, nil, fmt.Errorf("pack entry at %d: %w", off, err)
	}
	if hdr.Length < 0 || hdr.Length > maxObjectBytes {
		return nil, nil, fmt.Errorf("pack entry at %d: declares %d bytes, more than the %d an object may have here", off, hdr.Length, maxObjectBytes)
	}
	// go-git's scanner stops an entry that inflates past what it declares.
	var buf bytes.Buffer
	buf.Grow(int(min(hdr.Length, 64<<20)))
	if _, _, err := s.NextObject(&buf); err != nil {
		return nil, nil, fmt.Errorf("pack entry at %d: %w", off, err)
	}
	return hdr, buf.Bytes(), nil
}

func (po *packObjects) get(k packKey) (plumbing.ObjectType, []byte, bool) {
	po.mu.Lock()
	defer po.mu.Unlock()
	it, ok := po.cache.Get(k)
	if !ok {
		if it, ok = po.other.Get(k); !ok {
			return plumbing.InvalidObject, nil, false
		}
	}
	return it.typ, it.data, true
}

func (po *packObjects) put(k packKey, typ plumbing.ObjectType, data []byte) {
	po.mu.Lock()
	defer po.mu.Unlock()
	c := po.cache
	if typ != plumbing.BlobObject {
		c = po.other
	}
	c.Add(k, packItem{typ, data}, int64(len(data)))
}

// applyDelta applies a git delta (the format packfile.PatchDelta reads) to
// src, writing the result into one slice of the size the delta declares.
// It is PatchDelta's answer without its cost here: PatchDelta grows its
// result from 64 KB (a guard against a hostile size header), so each
// 300 KB revision of a file took four allocations, each cleared and
// copied into the next. Room past what the delta's commands could write, or
// past maxDeltaPrealloc, is made only as they write it. FuzzApplyDelta holds the two to the same answers.
func applyDelta(src, delta []byte) ([]byte, error) {
	if len(src) == 0 || len(delta) < 2 {
		return nil, packfile.ErrInvalidDelta // as PatchDelta: no delta on an empty base
	}
	srcSz, delta, ok := leb128(delta)
	if !ok || srcSz != uint64(len(src)) {
		return nil, packfile.ErrInvalidDelta
	}
	dstSz, delta, ok := leb128(delta)
	if !ok {
		return nil, packfile.ErrInvalidDelta
	}
	if dstSz > maxObjectBytes {
		return nil, fmt.Errorf("%w: builds %d bytes, more than the %d an object may have here", packfile.ErrInvalidDelta, dstSz, maxObjectBytes)
	}
	// Each command writes at most a whole src or 127 bytes of the delta.
	dst := make([]byte, 0, min(dstSz, maxDeltaPrealloc, uint64(len(delta))*uint64(max(len(src), 127))))
	for uint64(len(dst)) < dstSz {
		if len(delta) == 0 {
			return nil, packfile.ErrInvalidDelta
		}
		cmd := delta[0]
		delta = delta[1:]
		switch {
		case cmd&0x80 != 0: // copy from src: offset and size bytes as the bits say
			var off, n uint64
			for i := range 4 {
				if cmd&(1<<i) != 0 {
					if len(delta) == 0 {
						return nil, packfile.ErrInvalidDelta
					}
					off |= uint64(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			for i := range 3 {
				if cmd&(0x10<<i) != 0 {
					if len(delta) == 0 {
						return nil, packfile.ErrInvalidDelta
					}
					n |= uint64(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			if n == 0 {
				n = 0x10000
			}
			if n > dstSz-uint64(len(dst)) || off+n > uint64(len(src)) {
				return nil, packfile.ErrInvalidDelta
			}
			dst = append(dst, src[off:off+n]...)
		case cmd != 0: // insert the next cmd bytes of the delta
			n := uint64(cmd)
			if n > dstSz-uint64(len(dst)) || n > uint64(len(delta)) {
				return nil, packfile.ErrInvalidDelta
			}
			dst = append(dst, delta[:n]...)
			delta = delta[n:]
		default:
			return nil, packfile.ErrDeltaCmd
		}
	}
	if len(delta) != 0 {
		return nil, packfile.ErrInvalidDelta
	}
	return dst, nil
}

// maxDeltaPrealloc bounds the room made before a delta is applied.
const maxDeltaPrealloc = 64 << 20

// leb128 reads the little-endian base-128 size at the start of b, as
// go-git reads it (a size cut short by the end of b ends there).
func leb128(b []byte) (uint64, []byte, bool) {
	var v uint64
	for i := 0; i < len(b); i++ {
		if i*7 > 64-7 {
			return 0, b, false
		}
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 || i+1 == len(b) {
			return v, b[i+1:], true
		}
	}
	return 0, b, true
}

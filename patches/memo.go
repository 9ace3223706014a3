package patches

import (
	"sync"

	"github.com/smpatch/smpatch/internal/lru"
)

// FileHasher is a tree that names a file's content by its git blob hash
// (a revision read from the object store). Work done on a file's bytes is
// then remembered per hash in a Memo.
type FileHasher interface {
	FileHash(rel string) (BlobHash, bool)
}

// BlobHash is a git blob's object name (go-git's plumbing.Hash converts to
// it; this package does not link go-git).
type BlobHash = [20]byte

// Memo remembers, across plans of many revisions of one repository (a range
// walk), how the first hunk of a diff matched each file an anchor search
// read, keyed by the file's blob hash: a file that did not change between
// two revisions is not read or matched again. Safe for concurrent use.
//
// It also keeps the plan of a file diff on a blob: the same blob matches
// the same way. A plan where a hunk conflicts is kept without the file's
// bytes; one that resolves keeps the bytes it would write, up to
// memoResolvedBytes, least recently used out (a walk meets a blob again
// soon after, when a commit changes other watched files).
type Memo struct {
	mu       sync.Mutex
	anchor   map[anchorKey]anchorHit
	files    map[fileKey]*FilePlan
	resolved *lru.Cache[fileKey, *FilePlan] // plans that resolve, by their new bytes
}

// memoResolvedBytes bounds the new bytes of the resolved plans a Memo keeps.
const memoResolvedBytes = 8 << 20

type fileKey struct {
	fd      *FileDiff
	blob    BlobHash
	explain bool // a brief plan's reasons are not a full one's
}

type anchorKey struct {
	hunk *Hunk
	blob BlobHash
}

type anchorHit struct {
	status HunkStatus
	score  float64
}

// NewMemo returns an empty memo.
func NewMemo() *Memo {
	return &Memo{anchor: map[anchorKey]anchorHit{}, files: map[fileKey]*FilePlan{}, resolved: lru.New[fileKey, *FilePlan](memoResolvedBytes)}
}

// getFile returns a copy of the remembered plan, its bytes set to old.
func (m *Memo) getFile(k fileKey, old []byte) (*FilePlan, bool) {
	m.mu.Lock()
	fp, ok := m.files[k]
	if !ok {
		fp, ok = m.resolved.Get(k)
	}
	m.mu.Unlock()
	if !ok {
		return nil, false
	}
	c := *fp
	c.Old = old
	c.Hunks = append([]HunkResult(nil), fp.Hunks...)
	return &c, true
}

// putFile remembers fp, the plan of k.fd on the blob k.blob. The new bytes
// of a plan that resolves are kept as they are: they are only read.
func (m *Memo) putFile(k fileKey, fp *FilePlan) {
	c := *fp
	c.Old = nil
	c.Hunks = append([]HunkResult(nil), fp.Hunks...)
	m.mu.Lock()
	defer m.mu.Unlock()
	if hasConflict(fp) {
		c.New = nil
		m.files[k] = &c
		return
	}
	m.resolved.Add(k, &c, int64(len(c.New)))
}

func (m *Memo) getAnchor(k anchorKey) (anchorHit, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.anchor[k]
	return r, ok
}

func (m *Memo) putAnchor(k anchorKey, r anchorHit) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.anchor[k] = r
}

package patches

import (
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// FileHasher is a tree that names a file's content by its git blob hash
// (a revision read from the object store). Work done on a file's bytes is
// then remembered per hash in a Memo.
type FileHasher interface {
	FileHash(rel string) (plumbing.Hash, bool)
}

// Memo remembers, across plans of many revisions of one repository (a range
// walk), how the first hunk of a diff matched each file an anchor search
// read, keyed by the file's blob hash: a file that did not change between
// two revisions is not read or matched again. Safe for concurrent use.
//
// It also keeps the plan of a file diff on a blob when a hunk conflicts
// there (without the file's bytes): the same blob conflicts the same way.
type Memo struct {
	mu     sync.Mutex
	anchor map[anchorKey]anchorHit
	files  map[fileKey]*FilePlan
}

type fileKey struct {
	fd      *FileDiff
	blob    plumbing.Hash
	explain bool // a brief plan's reasons are not a full one's
}

type anchorKey struct {
	hunk *Hunk
	blob plumbing.Hash
}

type anchorHit struct {
	status HunkStatus
	score  float64
}

// NewMemo returns an empty memo.
func NewMemo() *Memo {
	return &Memo{anchor: map[anchorKey]anchorHit{}, files: map[fileKey]*FilePlan{}}
}

// getFile returns a copy of the remembered plan, its bytes set to old.
func (m *Memo) getFile(k fileKey, old []byte) (*FilePlan, bool) {
	m.mu.Lock()
	fp, ok := m.files[k]
	m.mu.Unlock()
	if !ok {
		return nil, false
	}
	c := *fp
	c.Old = old
	c.Hunks = append([]HunkResult(nil), fp.Hunks...)
	return &c, true
}

func (m *Memo) putFile(k fileKey, fp *FilePlan) {
	c := *fp
	c.Old, c.New = nil, nil
	c.Hunks = append([]HunkResult(nil), fp.Hunks...)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[k] = &c
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

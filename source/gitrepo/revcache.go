package gitrepo

import (
	"sync"

	"github.com/smpatch/smpatch/internal/lru"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// RevisionCache is shared by the revision trees of one repository walked
// commit after commit (a range walk): file listings are kept per directory
// tree hash, and file contents per blob hash, so that a directory or a file
// that did not change between two commits is neither listed nor inflated
// again. Contents are kept up to a byte budget, least recently used first
// out. Safe for concurrent use.
type RevisionCache struct {
	mu     sync.Mutex
	lists  map[plumbing.Hash][]listed
	listed int               // entries in lists
	names  map[string]string // one copy of each path listed
	full   map[pathsKey][]string
	blobs  *lru.Cache[plumbing.Hash, []byte] // file contents, by bytes
	budget int64                             // bytes, for the pack objects too
	packs  *packObjects                      // nil: blobs are read through go-git
}

type listed struct {
	name string // relative to the listed directory
	hash plumbing.Hash
}

// NewRevisionCache keeps up to maxBytes of file contents.
func NewRevisionCache(maxBytes int64) *RevisionCache {
	return &RevisionCache{lists: map[plumbing.Hash][]listed{}, names: map[string]string{}, full: map[pathsKey][]string{}, blobs: lru.New[plumbing.Hash, []byte](maxBytes), budget: maxBytes}
}

// ReadPacks makes the trees sharing c read file contents straight from
// repo's pack files (and those of the alternate object directories it
// reads), keeping each object resolved (a delta base on the way to a file's
// next revision too) per pack offset, within the cache's byte budget.
// Without it, or for an object no pack holds, contents are read through
// go-git and kept per blob hash. Close releases the pack files.
//
// It returns a handle on repo's history that reads every packed object
// (trees and commits too, kept apart from file contents, within
// otherBytes) the same way, and that goroutines may share: one pack index
// in memory for all of them. nil when repo's store is not on a file system
// or has no packs.
func (c *RevisionCache) ReadPacks(repo *git.Repository) *git.Repository {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.packs == nil {
		c.packs = openPackObjects(repo.Storer, c.budget, otherBytes)
	}
	if c.packs == nil {
		return nil
	}
	shared, err := git.Open(&packedStore{Storer: repo.Storer, packs: c.packs}, nil)
	if err != nil {
		return nil
	}
	return shared
}

// otherBytes bounds the trees, commits and tags ReadPacks keeps.
const otherBytes = 4 << 20

// Close closes the pack files ReadPacks opened.
func (c *RevisionCache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.packs.close()
	c.packs = nil
	return nil
}

func (c *RevisionCache) blob(h plumbing.Hash) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.blobs.Get(h)
}

func (c *RevisionCache) putBlob(h plumbing.Hash, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blobs.Add(h, data, int64(len(data)))
}

func (c *RevisionCache) listing(h plumbing.Hash) ([]listed, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.lists[h]
	return l, ok
}

type pathsKey struct {
	tree   plumbing.Hash
	prefix string
}

// paths is the listing l of the tree h under prefix as repository paths,
// made once per (tree, prefix). The slice is shared: read it only.
func (c *RevisionCache) paths(h plumbing.Hash, prefix string, l []listed) []string {
	k := pathsKey{h, prefix}
	c.mu.Lock()
	if p, ok := c.full[k]; ok {
		c.mu.Unlock()
		return p
	}
	c.mu.Unlock()
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = c.intern(prefix + e.name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listed+len(out) > maxListed {
		c.lists, c.full, c.listed = map[plumbing.Hash][]listed{}, map[pathsKey][]string{}, 0
	}
	c.full[k] = out
	c.listed += len(out)
	return out
}

// maxListed bounds the listing entries kept (about 40 bytes each).
const maxListed = 1 << 18

func (c *RevisionCache) putListing(h plumbing.Hash, l []listed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listed+len(l) > maxListed {
		c.lists, c.full, c.listed = map[plumbing.Hash][]listed{}, map[pathsKey][]string{}, 0
	}
	c.lists[h] = l
	c.listed += len(l)
}

func (c *RevisionCache) intern(s string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.names[s]; ok {
		return v
	}
	c.names[s] = s
	return s
}

package gitrepo

import (
	"container/list"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// RevisionCache is shared by the revision trees of one repository walked
// commit after commit (a range walk): file listings are kept per directory
// tree hash, and file contents per blob hash, so that a directory or a file
// that did not change between two commits is neither listed nor inflated
// again. Contents are kept up to a byte budget, least recently used first
// out. Safe for concurrent use.
type RevisionCache struct {
	mu       sync.Mutex
	lists    map[plumbing.Hash][]listed
	listed   int               // entries in lists
	names    map[string]string // one copy of each path listed
	full     map[pathsKey][]string
	blobs    map[plumbing.Hash]*list.Element
	order    *list.List // of *cachedBlob, most recent first
	size     int64
	maxBytes int64
}

type listed struct {
	name string // relative to the listed directory
	hash plumbing.Hash
}

type cachedBlob struct {
	hash plumbing.Hash
	data []byte
}

// NewRevisionCache keeps up to maxBytes of file contents.
func NewRevisionCache(maxBytes int64) *RevisionCache {
	return &RevisionCache{lists: map[plumbing.Hash][]listed{}, names: map[string]string{}, full: map[pathsKey][]string{}, blobs: map[plumbing.Hash]*list.Element{}, order: list.New(), maxBytes: maxBytes}
}

func (c *RevisionCache) blob(h plumbing.Hash) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.blobs[h]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedBlob).data, true
}

func (c *RevisionCache) putBlob(h plumbing.Hash, data []byte) {
	if int64(len(data)) > c.maxBytes/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.blobs[h]; ok {
		return
	}
	c.blobs[h] = c.order.PushFront(&cachedBlob{hash: h, data: data})
	c.size += int64(len(data))
	for c.size > c.maxBytes {
		e := c.order.Back()
		b := e.Value.(*cachedBlob)
		c.order.Remove(e)
		delete(c.blobs, b.hash)
		c.size -= int64(len(b.data))
	}
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

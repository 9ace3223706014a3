package gitrepo

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
)

// packedStore is an object store that goroutines may share: objects the
// pack files hold are read through packObjects (one index in memory, safe
// for concurrent use, bounded caches per pack offset), the rest (loose
// objects, a thin pack's bases) through go-git's store, one read at a time.
// go-git's own pack reader is not used for what the packs hold, so it never
// loads its copy of each pack index nor builds, on its first delta, its map
// from every offset of a pack to the object's hash. References and
// configuration are go-git's, read by one goroutine (before a walk's
// workers start).
type packedStore struct {
	storage.Storer
	packs *packObjects

	mu sync.Mutex // go-git's store
}

func (s *packedStore) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	typ, data, err := s.packs.object(h)
	switch {
	case err == nil:
		if t != plumbing.AnyObject && typ != t {
			return nil, plumbing.ErrObjectNotFound
		}
		return &packedObject{h: h, t: typ, data: data}, nil
	case !errors.Is(err, errNotPacked):
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Storer.EncodedObject(t, h)
}

func (s *packedStore) HasEncodedObject(h plumbing.Hash) error {
	if s.packs.has(h) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Storer.HasEncodedObject(h)
}

func (s *packedStore) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	if _, data, err := s.packs.object(h); err == nil {
		return int64(len(data)), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Storer.EncodedObjectSize(h)
}

func (s *packedStore) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Storer.SetEncodedObject(o)
}

func (s *packedStore) IterEncodedObjects(t plumbing.ObjectType) (storer.EncodedObjectIter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Storer.IterEncodedObjects(t)
}

// packedObject is an object read from a pack: its hash is the one it was
// looked up by (not computed again), its bytes shared with the cache.
type packedObject struct {
	h    plumbing.Hash
	t    plumbing.ObjectType
	data []byte
}

var _ plumbing.EncodedObject = (*packedObject)(nil)

func (o *packedObject) Hash() plumbing.Hash           { return o.h }
func (o *packedObject) Type() plumbing.ObjectType     { return o.t }
func (o *packedObject) SetType(t plumbing.ObjectType) { o.t = t }
func (o *packedObject) Size() int64                   { return int64(len(o.data)) }
func (o *packedObject) SetSize(int64)                 {}
func (o *packedObject) Reader() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(o.data)), nil
}
func (o *packedObject) Writer() (io.WriteCloser, error) { return nil, errReadOnlyObject }

var errReadOnlyObject = errors.New("an object read from a pack is read-only")

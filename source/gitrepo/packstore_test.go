package gitrepo

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/smpatch/smpatch/internal/testkit/gitbuild"
)

// packedRepo is a bare repository whose objects are all in one pack, with
// revisions of a growing file stored as deltas.
func packedRepo(t *testing.T) (*gitbuild.Builder, []plumbing.Hash) {
	t.Helper()
	b, err := gitbuild.New(filepath.Join(t.TempDir(), "sglang.git"))
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	var commits []plumbing.Hash
	for i := range 12 {
		fmt.Fprintf(&body, "def fused_allreduce_%d(x):\n    return torch.ops.sgl_kernel.allreduce(x, %d)\n\n", i, i)
		h, err := b.Commit(fmt.Sprintf("step %d", i), map[string][]byte{
			"python/sglang/srt/layers/communicator.py": bytes.Clone(body.Bytes()),
			"python/sglang/version.py":                 fmt.Appendf(nil, "__version__ = \"0.5.%d\"\n", i),
		})
		if err != nil {
			t.Fatal(err)
		}
		commits = append(commits, h)
	}
	if err := b.Repo.RepackObjects(&git.RepackConfig{}); err != nil {
		t.Fatal(err)
	}
	return b, commits
}

// allObjects lists every object of repo with its type and bytes, as go-git
// reads them.
func allObjects(t *testing.T, repo *git.Repository) map[plumbing.Hash]string {
	t.Helper()
	it, err := repo.Storer.IterEncodedObjects(plumbing.AnyObject)
	if err != nil {
		t.Fatal(err)
	}
	out := map[plumbing.Hash]string{}
	err = it.ForEach(func(o plumbing.EncodedObject) error {
		r, err := o.Reader()
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		out[o.Hash()] = o.Type().String() + "\x00" + string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The handle ReadPacks returns reads every object as go-git does, from
// the pack, and goroutines may share it.
func TestReadPacksSameObjects(t *testing.T) {
	b, commits := packedRepo(t)
	want := allObjects(t, b.Repo)
	c := NewRevisionCache(1 << 20)
	defer c.Close()
	shared := c.ReadPacks(b.Repo)
	if shared == nil {
		t.Fatal("ReadPacks found no packs")
	}
	if _, ok := shared.Storer.(*packedStore); !ok {
		t.Fatalf("store %T", shared.Storer)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h, w := range want {
				o, err := shared.Storer.EncodedObject(plumbing.AnyObject, h)
				if err != nil {
					errs <- fmt.Errorf("%s: %v", h, err)
					return
				}
				r, _ := o.Reader()
				got, _ := io.ReadAll(r)
				if o.Hash() != h || o.Type().String()+"\x00"+string(got) != w || o.Size() != int64(len(got)) {
					errs <- fmt.Errorf("%s: %s %d bytes, not what go-git reads", h, o.Type(), len(got))
					return
				}
				if _, err := shared.Storer.EncodedObject(plumbing.TagObject, h); err != plumbing.ErrObjectNotFound && o.Type() != plumbing.TagObject {
					errs <- fmt.Errorf("%s as a tag: %v", h, err)
					return
				}
			}
			for _, h := range commits {
				rt, err := OpenRevision(shared, h, "sglang", "")
				if err != nil {
					errs <- err
					return
				}
				rt.SetCache(c)
				if _, err := rt.ReadFile("python/sglang/srt/layers/communicator.py"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := shared.Storer.HasEncodedObject(plumbing.NewHash("0123456789012345678901234567890123456789")); err != plumbing.ErrObjectNotFound {
		t.Fatalf("missing object: %v", err)
	}
	// Closed, the packs are let go and the handle reads through go-git.
	c.Close()
	if _, err := shared.CommitObject(commits[3]); err != nil {
		t.Fatalf("after Close: %v", err)
	}
}

// A repository that borrows its objects through objects/info/alternates
// (git clone --shared) has its file contents read from the lender's packs.
func TestReadPacksThroughAlternates(t *testing.T) {
	b, commits := packedRepo(t)
	dir := filepath.Join(t.TempDir(), "clone")
	if _, err := git.PlainInit(dir, false); err != nil {
		t.Fatal(err)
	}
	alt := filepath.Join(dir, ".git", "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(filepath.Join(b.Dir, "objects")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head := commits[len(commits)-1]
	if err := os.WriteFile(filepath.Join(dir, ".git", "refs", "heads", "master"), []byte(head.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := NewRevisionCache(1 << 20)
	defer c.Close()
	shared := c.ReadPacks(repo)
	if shared == nil {
		t.Fatal("ReadPacks found no packs behind the alternate")
	}
	rt, err := OpenRevision(shared, head, "sglang", "")
	if err != nil {
		t.Fatal(err)
	}
	h, ok := rt.FileHash("python/sglang/srt/layers/communicator.py")
	if !ok {
		t.Fatal("no communicator.py")
	}
	o, err := shared.Storer.EncodedObject(plumbing.BlobObject, h)
	p, ok := o.(*packedObject)
	if err != nil || !ok {
		t.Fatalf("the blob was not read from the alternate's pack: %T, %v", o, err)
	}
	data := p.data
	blob, err := object.GetBlob(b.Repo.Storer, h)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != blob.Size {
		t.Fatalf("%d bytes, want %d", len(data), blob.Size)
	}
}

// offset answers as go-git's MemoryIndex.FindOffset, 64-bit offsets
// included, and remembers nothing.
func TestPackOffsetAsFindOffset(t *testing.T) {
	idx := idxfile.NewMemoryIndex()
	for i := range idx.FanoutMapping {
		idx.FanoutMapping[i] = -1
	}
	var names [][20]byte
	for i := range 40 {
		var h [20]byte
		h[0] = byte(i % 3 * 80)
		h[1] = byte(i)
		h[19] = byte(7 * i)
		names = append(names, h)
	}
	// Three buckets (first bytes 0, 80, 160), names sorted within each.
	for k, first := range []byte{0, 80, 160} {
		idx.FanoutMapping[first] = k
		var ns, offs []byte
		for i, h := range names {
			if h[0] != first {
				continue
			}
			ns = append(ns, h[:]...)
			if i%4 == 0 { // a 64-bit offset, past 2 GB
				n := len(idx.Offset64) / 8
				idx.Offset64 = binary.BigEndian.AppendUint64(idx.Offset64, 1<<32+uint64(i))
				offs = binary.BigEndian.AppendUint32(offs, 1<<31|uint32(n))
			} else {
				offs = binary.BigEndian.AppendUint32(offs, uint32(1000+i))
			}
		}
		idx.Names = append(idx.Names, ns)
		idx.Offset32 = append(idx.Offset32, offs)
	}
	count := uint32(0)
	for i := range idx.Fanout {
		for _, h := range names {
			if int(h[0]) == i {
				count++
			}
		}
		idx.Fanout[i] = count
	}
	p := &packFile{idx: idx}
	probe := append([][20]byte{{1}, {80, 200}, {255}}, names...)
	for _, h := range probe {
		got, ok := p.offset(h)
		want, err := idx.FindOffset(h)
		if ok != (err == nil) || got != want {
			t.Fatalf("%x: offset %d %v, FindOffset %d %v", h, got, ok, want, err)
		}
	}
}

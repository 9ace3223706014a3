package gitrepo

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/smpatch/smpatch/internal/testkit/gitbuild"
)

// packEntry is one hand-made pack entry: its header declares size, its
// zlib stream holds body.
func packEntry(typ int, size int64, prefix, body []byte) []byte {
	var b bytes.Buffer
	c := byte(typ<<4) | byte(size&15)
	size >>= 4
	for size > 0 {
		b.WriteByte(c | 0x80)
		c, size = byte(size&0x7f), size>>7
	}
	b.WriteByte(c)
	b.Write(prefix)
	z := zlib.NewWriter(&b)
	z.Write(body)
	z.Close()
	return b.Bytes()
}

func pack(entries ...[]byte) []byte {
	var b bytes.Buffer
	b.WriteString("PACK")
	binary.Write(&b, binary.BigEndian, [2]uint32{2, uint32(len(entries))})
	for _, e := range entries {
		b.Write(e)
	}
	b.Write(make([]byte, 20)) // the checksum: not checked here
	return b.Bytes()
}

func TestScanPack(t *testing.T) {
	uvarint := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	delta := append(uvarint(3), uvarint(5<<30)...) // base 3 bytes, result 5 GiB
	tests := []struct {
		name, want string
		data       []byte
	}{
		{"small objects", "", pack(packEntry(3, 5, nil, []byte("hello")), packEntry(3, 0, nil, nil))},
		{"blob declaring 1 GiB", "pack entry 1 (a blob): 1073741824 bytes, more than", pack(packEntry(3, 5, nil, []byte("hello")), packEntry(3, 1<<30, nil, nil))},
		{"delta building 5 GiB", "pack entry 0 (a delta) builds: 5368709120 bytes", pack(packEntry(7, int64(len(delta)), make([]byte, 20), delta))},
		{"inflates past its size", "inflates to 7 bytes where it declares 6", pack(packEntry(3, 6, nil, []byte("abcdefghijk")))},
		{"cut short", "unexpected EOF", pack(packEntry(3, 5, nil, []byte("hello")))[:20]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := scanPack(bufio.NewReader(bytes.NewReader(tt.data)), maxObjectBytes)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// bigBlobRepo is an upstream whose one commit holds a blob past
// objectLimit (lowered to 1 MiB for the test).
func bigBlobRepo(t *testing.T) *gitbuild.Builder {
	t.Helper()
	old := objectLimit
	objectLimit = 1 << 20
	t.Cleanup(func() { objectLimit = old })
	b, err := gitbuild.New(filepath.Join(t.TempDir(), "sglang.git"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit("import", map[string][]byte{
		"python/sglang/version.py": []byte("__version__ = \"0.5.9\"\n"),
		"python/sglang/zeros.bin":  make([]byte, objectLimit+1),
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// A fetch is refused at the entry of the blob past the bound, and nothing
// of the cache is left; a checkout from a store that holds it refuses it
// before writing anything.
func TestBlobPastBound(t *testing.T) {
	ctx := context.Background()
	b := bigBlobRepo(t)
	c := &RepoCache{Dir: t.TempDir()}
	_, err := c.Open(ctx, b.URL())
	var big *ObjectTooLargeError
	if !errors.As(err, &big) || big.Size != objectLimit+1 {
		t.Fatalf("fetch: %v, want the blob refused", err)
	}
	if ents, _ := os.ReadDir(c.Dir); len(ents) != 0 {
		t.Fatalf("cache left: %v", ents)
	}
	u := &Upstream{URL: b.URL(), Repo: b.Repo}
	dir := filepath.Join(t.TempDir(), "work")
	err = u.Checkout(ctx, b.Head(), dir, "")
	if !errors.As(err, &big) || !strings.Contains(err.Error(), "python/sglang/zeros.bin: 1048577 bytes") {
		t.Fatalf("checkout: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("checkout left %s: %v", dir, err)
	}
}

func FuzzScanPack(f *testing.F) {
	f.Add(pack(packEntry(3, 5, nil, []byte("hello"))))
	f.Add(pack(packEntry(7, 4, make([]byte, 20), []byte{3, 5, 0x90, 1})))
	f.Fuzz(func(t *testing.T, data []byte) {
		scanPack(bufio.NewReader(bytes.NewReader(data)), 1<<20)
	})
}

// A tag naming a tree or a blob is said to be one, not "unknown revision".
func TestTagNamingATree(t *testing.T) {
	b, _ := upstreamRepo(t)
	c, err := b.Repo.CommitObject(b.Head())
	if err != nil {
		t.Fatal(err)
	}
	tree, _ := c.Tree()
	blob := tree.Entries[0].Hash
	for name, h := range map[string]plumbing.Hash{"v9.0.0-tree": c.TreeHash, "v9.0.0-blob": blob} {
		if err := b.Repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewTagReferenceName(name), h)); err != nil {
			t.Fatal(err)
		}
		_, err := ResolveRevision(b.Repo, name)
		kind := strings.TrimPrefix(name, "v9.0.0-")
		if !errors.Is(err, ErrUnknownRevision) || err.Error() != `tag "`+name+`" names a `+kind+`, not a commit` {
			t.Errorf("%s: %v", name, err)
		}
	}
}

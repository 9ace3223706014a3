package gitrepo

import (
	"bytes"
	"compress/zlib"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/util"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// deltaCase builds a delta with go-git's encoder, from src to dst.
func deltaCase(src, dst []byte) []byte {
	return packfile.DiffDelta(src, dst)
}

// applyDelta gives what go-git's PatchDelta gives: the same bytes, or an
// error for the same delta.
func FuzzApplyDelta(f *testing.F) {
	base := bytes.Repeat([]byte("def gen_module() -> JitSpec:\n    return gen_jit_spec()\n"), 40)
	next := append(append([]byte("import os\n"), base[:900]...), base[1000:]...)
	f.Add(base, deltaCase(base, next))
	f.Add(base, deltaCase(base, bytes.Repeat([]byte{'x'}, 70000)))
	f.Add([]byte("a"), []byte{1, 0})
	f.Add([]byte("abc"), []byte{3, 2, 0x91, 1, 2})
	f.Add([]byte("abc"), []byte{3, 5, 0x80})
	f.Add([]byte(""), []byte{0, 1, 1, 'x'})
	f.Fuzz(func(t *testing.T, src, delta []byte) {
		want, werr := packfile.PatchDelta(src, delta)
		got, gerr := applyDelta(src, delta)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("PatchDelta error %v, applyDelta error %v", werr, gerr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("applyDelta %q, PatchDelta %q", got, want)
		}
	})
}

// A delta made by go-git from one revision of a file to the next gives the
// next revision back.
func TestApplyDeltaRoundTrip(t *testing.T) {
	base := bytes.Repeat([]byte("    nvcc_flags = current_compilation_context.get_nvcc_flags_list()\n"), 5000)
	next := append(append([]byte{}, base[:100000]...), append([]byte("# one more line\n"), base[100000:]...)...)
	got, err := applyDelta(base, packfile.DiffDelta(base, next))
	if err != nil || !bytes.Equal(got, next) {
		t.Fatalf("applyDelta: %v, %d bytes, want %d", err, len(got), len(next))
	}
	if cap(got) != len(next) {
		t.Errorf("result has room for %d bytes, want exactly %d", cap(got), len(next))
	}
}

// packWithOneEntry is a pack file holding one entry: its type and declared
// size in the entry header, then body deflated.
func packWithOneEntry(t *testing.T, typ byte, declared uint64, body []byte) *packFile {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("PACK")
	b.Write([]byte{0, 0, 0, 2, 0, 0, 0, 1})
	c := typ<<4 | byte(declared&0x0f)
	declared >>= 4
	for declared > 0 {
		b.WriteByte(c | 0x80)
		c = byte(declared & 0x7f)
		declared >>= 7
	}
	b.WriteByte(c)
	zw := zlib.NewWriter(&b)
	zw.Write(body)
	zw.Close()
	b.Write(make([]byte, 20)) // the trailer's place
	fs := memfs.New()
	if err := util.WriteFile(fs, "p.pack", b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open("p.pack")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &packFile{f: f, size: int64(b.Len())}
}

// A pack entry that inflates past the size it declares (a few bytes of
// pack, megabytes of zeros) is refused when it passes that size, not read
// whole; one that declares more than an object may have here is refused
// before anything is inflated.
func TestPackEntryBounded(t *testing.T) {
	const blob = 3
	p := packWithOneEntry(t, blob, 5, []byte("hello"))
	if _, data, err := p.entry(12); err != nil || string(data) != "hello" {
		t.Fatalf("a well-formed entry: %q, %v", data, err)
	}
	p = packWithOneEntry(t, blob, 10, make([]byte, 8<<20))
	_, _, err := p.entry(12)
	if err == nil || !strings.Contains(err.Error(), "exceeds declared size") {
		t.Fatalf("an entry inflating past its size: %v", err)
	}
	p = packWithOneEntry(t, blob, 1<<40, []byte("x"))
	_, _, err = p.entry(12)
	if err == nil || !strings.Contains(err.Error(), "declares 1099511627776 bytes") {
		t.Fatalf("an entry declaring a terabyte: %v", err)
	}
}

// A delta that declares a result larger than an object may have is refused
// before it is applied.
func TestApplyDeltaBounded(t *testing.T) {
	delta := []byte{3}
	n := uint64(maxObjectBytes + 1)
	for n >= 0x80 {
		delta = append(delta, byte(n)|0x80)
		n >>= 7
	}
	delta = append(delta, byte(n), 0x91, 0, 3)
	_, err := applyDelta([]byte("abc"), delta)
	if err == nil || !strings.Contains(err.Error(), "more than the") {
		t.Fatalf("a delta building more than %d bytes: %v", maxObjectBytes, err)
	}
}

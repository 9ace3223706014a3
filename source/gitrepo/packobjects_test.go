package gitrepo

import (
	"bytes"
	"testing"

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

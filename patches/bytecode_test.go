package patches

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/smpatch/smpatch/patches/journal"
)

// timestampPyc is a pyc header of the timestamp kind (PEP 552, flags 0)
// for a source of mtime and size, then a body.
func timestampPyc(mtime time.Time, size int, body string) []byte {
	b := make([]byte, 16)
	copy(b, "\x6f\x0d\x0d\x0a")
	binary.LittleEndian.PutUint32(b[8:12], uint32(mtime.Unix()))
	binary.LittleEndian.PutUint32(b[12:16], uint32(size))
	return append(b, body...)
}

// Revert puts back the bytecode apply removed and, for a timestamp pyc,
// the source's mtime it records, so the pyc is valid again; bytecode
// compiled from the patched bytes is removed. A rollback does the same.
func TestRevertRestoresBytecode(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	cat := engineCatalog(t)
	src := filepath.Join(root, filepath.FromSlash(commPath))
	installed := time.Unix(1767225600, 0) // as pip left it
	if err := os.Chtimes(src, installed, installed); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(filepath.Dir(src), "__pycache__")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	stamp := timestampPyc(installed, len(commOrig), "code")
	hashed := append([]byte("\x6f\x0d\x0d\x0a\x03\x00\x00\x00hashhash"), "code"...)
	os.WriteFile(filepath.Join(cache, "comm.cpython-312.pyc"), stamp, 0o644)
	os.WriteFile(filepath.Join(cache, "comm.cpython-312.opt-1.pyc"), hashed, 0o644)
	os.WriteFile(filepath.Join(cache, "comm_ops.cpython-312.pyc"), []byte("other"), 0o644)

	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cache, "comm.cpython-312.pyc")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("apply kept the stale pyc")
	}
	// The server ran on the patched bytes and compiled them.
	os.WriteFile(filepath.Join(cache, "comm.cpython-312.pyc"), []byte("patched code"), 0o644)
	os.WriteFile(filepath.Join(cache, "comm.cpython-313.pyc"), []byte("patched code"), 0o644)

	res, err := Revert(ctx, tr, cat, nil, RevertOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{"comm.cpython-312.pyc": stamp, "comm.cpython-312.opt-1.pyc": hashed, "comm_ops.cpython-312.pyc": []byte("other")} {
		got, err := os.ReadFile(filepath.Join(cache, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after revert: %q, %v; want the bytes before apply", name, got, err)
		}
	}
	if _, err := os.Stat(filepath.Join(cache, "comm.cpython-313.pyc")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("bytecode compiled from the patched bytes kept")
	}
	st, err := os.Stat(src)
	if err != nil || !st.ModTime().Equal(installed) {
		t.Errorf("source mtime %v, want %v (the pyc's)", st.ModTime(), installed)
	}
	f := res.Patches[0].Files[0]
	if len(f.PycRestored) != 2 || len(f.PycRemoved) != 2 {
		t.Errorf("reported removed %v, restored %v", f.PycRemoved, f.PycRestored)
	}
	if _, err := os.Stat(filepath.Join(root, ".smpatch")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("journal left after the last revert")
	}

	// A rollback (a verify rule that fails after writing) puts them back too.
	q := *p
	q.Verify = append(q.Verify, VerifyRule{File: argsPath, Contains: "never there"})
	set := setOf(tr, &Plan{Patch: &q, Variant: p.Variants[0], Files: plan(t, p, tr).Files})
	if _, err := Apply(ctx, tr, set, ApplyOptions{}); err == nil {
		t.Fatal("apply with a failing rule succeeded")
	}
	got, _ := os.ReadFile(filepath.Join(cache, "comm.cpython-312.pyc"))
	if !bytes.Equal(got, stamp) {
		t.Errorf("pyc after a rollback: %q", got)
	}
}

// A bytecode record outside the __pycache__ beside its file is a damaged
// journal, never a place written to.
func TestBytecodeRecordConfined(t *testing.T) {
	for _, tc := range []struct{ pyc, src string }{
		{"python/sglang/x/__pycache__/comm.cpython-312.pyc", "python/sglang/x/comm.py"},
		{"python/sglang/x/__pycache__/comm.cpython-312.opt-2.pyc", "python/sglang/x/comm.py"},
	} {
		if !journal.IsBytecodeOf(tc.pyc, tc.src) {
			t.Errorf("%s should be bytecode of %s", tc.pyc, tc.src)
		}
	}
	for _, tc := range []struct{ pyc, src string }{
		{"python/sglang/x/__pycache__/other.cpython-312.pyc", "python/sglang/x/comm.py"},
		{"python/sglang/__pycache__/comm.cpython-312.pyc", "python/sglang/x/comm.py"},
		{"python/sglang/x/__pycache__/comm.pyc", "python/sglang/x/comm.py"},
		{"python/sglang/x/comm.cpython-312.pyc", "python/sglang/x/comm.py"},
		{"python/sglang/x/__pycache__/comm.cpython-312.pyc", "python/sglang/x/comm.txt"},
		{"python/sglang/x/__pycache__/comm.cpython-312.py", "python/sglang/x/comm.py"},
	} {
		if journal.IsBytecodeOf(tc.pyc, tc.src) {
			t.Errorf("%s is not bytecode of %s", tc.pyc, tc.src)
		}
	}
}

package patches

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// The engine over journals that are not as it wrote them; the journal's
// own checks are package journal's tests.

// A copy whose bytes are not the ones recorded is never written: revert
// and rollback refuse, naming the copy.
func TestJournalTamperedCopy(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	patched := snapshot(t, root)
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	evil := "import os\nos.system('id')\n"
	for _, rel := range []string{commPath, argsPath} {
		w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(evil))})
		w.Write([]byte(evil))
	}
	w.Close()
	os.WriteFile(filepath.Join(root, source.StateDirName, "demo.orig.tar"), b.Bytes(), 0o644)
	_, err := Revert(ctx, tr, nil, nil, RevertOptions{})
	var je *journal.JournalError
	if !errors.As(err, &je) || !strings.Contains(err.Error(), "the journal recorded") {
		t.Fatalf("revert: %v", err)
	}
	if !sameSnap(patched, snapshot(t, root)) {
		t.Fatal("tree changed")
	}
	st, err := Status(ctx, tr, nil, journal.Options{})
	if err != nil || st.Patches[0].Damaged == "" || st.Patches[0].Clean {
		t.Fatalf("status: %+v %v", st.Patches[0], err)
	}
}

// A file name that is not UTF-8 is journaled losslessly and reverts.
func TestJournalNonUTF8Name(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	name := "python/sglang/srt/caf\xe9.py"
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(name)), []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	diff := "diff --git a/" + name + " b/" + name + "\n--- a/" + name + "\n+++ b/" + name + "\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
	toml := strings.Replace(engineTOML, "[[verify]]\nfile = \"python/sglang/srt/layers/comm.py\"\ncontains = \"_is_sm120_supported\"\n", "", 1)
	ps, err := catalog.LoadFS(catFS(map[string]string{"demo.toml": toml, "demo/a.diff": diff}), "cat", "test")
	if err != nil {
		t.Fatal(err)
	}
	orig := snapshot(t, root)
	if _, err := apply(t, ps[0], tr); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, filepath.FromSlash(name))); string(b) != "x = 2\n" {
		t.Fatalf("not applied: %q", b)
	}
	sj, _ := os.ReadFile(filepath.Join(root, source.StateDirName, "state.json"))
	if !strings.Contains(string(sj), `"path_b64"`) {
		t.Fatalf("state.json: %s", sj)
	}
	st, err := Status(ctx, tr, nil, journal.Options{})
	if err != nil || !st.Patches[0].Clean {
		t.Fatalf("status: %+v %v", st, err)
	}
	if _, err := Revert(ctx, tr, nil, nil, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if !sameSnap(orig, snapshot(t, root)) {
		t.Fatalf("not reverted: %s", diffSnap(orig, snapshot(t, root)))
	}
}

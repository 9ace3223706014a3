package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestVendoredTreeStaysClean: a tree vendored inside another repository
// (no .git of its own, so no .git/info/exclude of its own) is patched;
// the outer repository's status lists the patched file and nothing of
// .smpatch/, which carries its own .gitignore.
func TestVendoredTreeStaysClean(t *testing.T) {
	outer := t.TempDir()
	tree := filepath.Join(outer, "vendor", "sglang")
	files := map[string]string{
		"vendor/sglang/python/sglang/__init__.py":        "",
		"vendor/sglang/python/sglang/version.py":         "__version__ = \"0.5.6\"\n",
		"vendor/sglang/python/sglang/srt/layers/comm.py": "_is_sm100_supported = is_sm100_supported()\n\n\ndef apply_fusion(batch_size):\n    return _is_sm100_supported\n",
	}
	for rel, body := range files {
		writeTestFile(t, filepath.Join(outer, rel), body)
	}
	repo, err := git.PlainInit(outer, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddGlob("vendor"); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(0, 0)}
	if _, err := wt.Commit("vendor sglang", &git.CommitOptions{Author: sig}); err != nil {
		t.Fatal(err)
	}

	cat := t.TempDir()
	writeTestFile(t, filepath.Join(cat, "demo.toml"), "name = \"demo\"\nproject = \"sglang\"\n\n[[variant]]\nname = \"v05\"\nversions = \">= 0.5.0, < 0.6\"\ndiffs = [\"demo/gate.diff\"]\n")
	writeTestFile(t, filepath.Join(cat, "demo", "gate.diff"), "--- a/python/sglang/srt/layers/comm.py\n+++ b/python/sglang/srt/layers/comm.py\n@@ -1,4 +1,5 @@\n _is_sm100_supported = is_sm100_supported()\n+_is_sm120_supported = True\n \n \n def apply_fusion(batch_size):\n")
	t.Setenv("SMPATCH_REPO", "")
	t.Setenv("SMPATCH_CATALOG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	var out, errb bytes.Buffer
	if code := run([]string{"--catalog", cat, "apply", "demo", "--repo", tree}, &out, &errb); code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if _, err := os.Stat(filepath.Join(tree, ".smpatch", "state.json")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(tree, ".smpatch", ".gitignore")); err != nil || !bytes.Contains(b, []byte("\n*\n")) {
		t.Fatalf(".smpatch/.gitignore: %q, %v", b, err)
	}
	st, err := wt.Status()
	if err != nil {
		t.Fatal(err)
	}
	for path, s := range st {
		if path != "vendor/sglang/python/sglang/srt/layers/comm.py" {
			t.Errorf("outer repository status lists %s (%c%c)", path, s.Staging, s.Worktree)
		}
	}
	if len(st) != 1 {
		t.Errorf("status: %v, want only the patched file", st)
	}

	// Revert leaves nothing behind, .gitignore included.
	if code := run([]string{"revert", "--repo", tree}, &out, &errb); code != 0 {
		t.Fatalf("revert: exit %d\n%s", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(tree, ".smpatch")); !os.IsNotExist(err) {
		t.Fatalf(".smpatch after revert: %v", err)
	}
}

func writeTestFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

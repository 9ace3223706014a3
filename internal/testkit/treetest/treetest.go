// Package treetest writes the small file trees tests work on: files by
// slash-separated path, and a minimal tree shaped like an sglang checkout.
// It is for tests only and knows nothing of smpatch's packages.
package treetest

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes path → contents under root, making directories as needed.
func Write(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// SGLangCheckout is a minimal tree shaped like an sglang checkout in a new
// temporary directory: python/sglang/ with a version.py literal when ver is
// not "" (as in releases up to 0.5.6.post2), without one otherwise.
func SGLangCheckout(t testing.TB, ver string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"python/sglang/__init__.py":            "",
		"python/sglang/srt/layers/comm.py":     "x = 1\n",
		"python/sglang/srt/layers/__init__.py": "",
	}
	if ver != "" {
		files["python/sglang/version.py"] = "__version__ = \"" + ver + "\"\n"
	}
	Write(t, root, files)
	return root
}

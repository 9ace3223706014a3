package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkoutAt makes an sglang checkout under dir/src/sglang and returns it.
func checkoutAt(t testing.TB, dir string) string {
	t.Helper()
	root := filepath.Join(dir, "src", "sglang")
	if err := os.MkdirAll(filepath.Join(root, "python", "sglang", "srt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "python", "sglang", "__init__.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := cleanRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFindEditable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string // site-packages relative; @ROOT@ is the checkout
		via   string            // "" when none points at the checkout
	}{
		{"direct_url", map[string]string{
			"sglang-0.5.9.dist-info/METADATA":        "Name: sglang\nVersion: 0.5.9\n",
			"sglang-0.5.9.dist-info/direct_url.json": `{"url": "file://@ROOT@/python", "dir_info": {"editable": true}}`,
		}, "sglang-0.5.9.dist-info/direct_url.json"},
		{"path pth", map[string]string{"__editable__.sglang-0.5.9.pth": "@ROOT@/python\n"}, "__editable__.sglang-0.5.9.pth"},
		{"relative pth", map[string]string{"_sglang.pth": "# uv\n../../../../src/sglang/python\n"}, "_sglang.pth"},
		{"finder", map[string]string{
			"__editable__.sglang-0.5.9.pth":       "import __editable___sglang_0_5_9_finder; __editable___sglang_0_5_9_finder.install()\n",
			"__editable___sglang_0_5_9_finder.py": "MAPPING: dict[str, str] = {'other': '/x', 'sglang': '@ROOT@/python/sglang'}\n",
		}, "__editable__.sglang-0.5.9.pth -> __editable___sglang_0_5_9_finder.py"},
		{"old finder", map[string]string{
			"__editable__.sglang-0.5.9.pth":       "import __editable___sglang_0_5_9_finder; __editable___sglang_0_5_9_finder.install()\n",
			"__editable___sglang_0_5_9_finder.py": "MAPPING = {\"sglang\": \"@ROOT@/python/sglang\"}\n",
		}, "__editable__.sglang-0.5.9.pth -> __editable___sglang_0_5_9_finder.py"},
		{"egg-link", map[string]string{"sglang.egg-link": "@ROOT@/python\n."}, "sglang.egg-link"},
		{"other pth", map[string]string{"distutils-precedence.pth": "import os; var = 'SETUPTOOLS_USE_DISTUTILS'\n", "x.pth": "/nowhere\n"}, ""},
		{"finder for another package", map[string]string{
			"__editable__.foo-1.pth":       "import __editable___foo_1_finder; __editable___foo_1_finder.install()\n",
			"__editable___foo_1_finder.py": "MAPPING = {'foo': '@ROOT@/python/sglang'}\n",
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			root := checkoutAt(t, base)
			sp := filepath.Join(base, "venv", "lib", "python3.12", "site-packages")
			for name, data := range tc.files {
				p := filepath.Join(sp, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(strings.ReplaceAll(data, "@ROOT@", root)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			e, err := FindEditable([]string{sp}, SGLang)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.via == "" && e != nil:
				t.Fatalf("found %+v, want none", e)
			case tc.via == "":
			case e == nil:
				t.Fatalf("none found, want via %s", tc.via)
			case e.Checkout != root || e.Via != tc.via || e.SitePackages != sp:
				t.Fatalf("found %+v, want %s via %s", e, root, tc.via)
			}
			// --repo on that site-packages directory opens the checkout.
			tr, err := openDir(sp, SGLang)
			if tc.via == "" {
				if err == nil {
					t.Fatalf("openDir opened %s", tr.Root())
				}
				return
			}
			if err != nil || tr.Root() != root || tr.Kind() != KindCheckout || !strings.Contains(ViaOf(tr), tc.via) {
				t.Fatalf("openDir: %v, %v", tr, err)
			}
		})
	}
}

// FuzzEditablePointers: whatever a .pth, a finder module or an egg-link
// holds, FindEditable reads it bounded and without a panic, and only ever
// names a checkout of the project.
func FuzzEditablePointers(f *testing.F) {
	f.Add("/tmp/x/python\n", "MAPPING = {'sglang': '/tmp/x/python/sglang'}\n", "/tmp/x/python\n.")
	f.Add("import __editable___sglang_finder; x()\n", "MAPPING: dict = {'sglang': ''}", "")
	f.Fuzz(func(t *testing.T, pth, finder, link string) {
		base := t.TempDir()
		checkoutAt(t, base)
		sp := filepath.Join(base, "sp")
		if err := os.MkdirAll(sp, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string]string{"a.pth": pth, "__editable___sglang_finder.py": finder, "sglang.egg-link": link} {
			if err := os.WriteFile(filepath.Join(sp, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		e, err := FindEditable([]string{sp}, SGLang)
		if err != nil {
			t.Fatal(err)
		}
		if e != nil {
			if p, ok := DetectCheckout(e.Checkout); !ok || p != SGLang {
				t.Fatalf("%+v is no sglang checkout", e)
			}
		}
	})
}

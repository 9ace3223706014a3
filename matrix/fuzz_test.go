package matrix

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the matrix loader and, when they load,
// to Expand: neither may panic, and errors stay one line.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("..", "examples", "story", "matrix.toml")); err == nil {
		f.Add(data)
	}
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.toml"))
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("[axes]\na = [1, 2]\nb = [\"x\"]\n[[exclude]]\na = 1\n[[include]]\na = 3\nb = \"y\"\n[launch]\ncommand = [\"{{.a}}\"]\n"))
	f.Add([]byte("zip = [[\"a\", \"b\"]]\n[axes]\na = [1, 2]\nb = [3, 4]\n[launch]\ncommand = [\"x\"]\nbaseline = { a = 1 }\n"))
	f.Add([]byte("[axes]\npatches = [[], [\"p\"]]\nn = [\"d\"]\n[presets.n.d]\nNCCL_ALGO = \"Tree\"\n\"--x\" = true\n[launch]\ncommand = [\"x\"]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse("f.toml", data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		if len(m.RuleFiles) > 0 {
			return
		}
		x, err := m.Expand(ExpandOptions{MaxCells: 64})
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, c := range x.Cells {
			if c.ID == "" || slug(c.ID) != c.ID && !strings.Contains(c.ID, "..") {
				t.Fatalf("bad id %q", c.ID)
			}
			if seen[c.ID] {
				t.Fatalf("duplicate id %q", c.ID)
			}
			seen[c.ID] = true
		}
	})
}

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
	// Small seeds on purpose: the fuzzer minimizes every input that finds
	// new coverage, and minimizing a 3 KB file (the story example) takes
	// most of a short run.
	f.Add([]byte("name = \"s\"\nmax_cells = 9\n[axes]\npatches = [[], [\"p\"]]\nsm = \"12.0\"\n[id_prefix]\nsm = \"g\"\n[launch]\ncommand = [\"x\", \"--tp\", \"2\"]\nhealth = \"http://127.0.0.1:1/h\"\nmetric = 'v: ([0-9]+)'\nbaseline = \"unpatched\"\n"))
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

// FuzzParseRules feeds arbitrary bytes to the rules loader, then runs the
// rules that load over a small matrix.
func FuzzParseRules(f *testing.F) {
	f.Add([]byte("version = 1\n[[rule]]\nname = \"p\"\naction = \"prune\"\nreason = \"r\"\nsource = \"s\"\n[rule.when]\npatches = \"x\"\nprobe_verdict = { m = [\"unknown\"] }\nflag_values = { \"--x\" = \"1\" }\ncuda_graphs = true\n"))
	f.Add([]byte("version = 1\n[[rule]]\nname = \"r\"\naction = \"require-flag\"\nflag = \"--x\"\nreason = \"r\"\nsource = \"s\"\n[rule.when]\naxis = { a = [1, 2] }\nno_flags = [\"--x\"]\n"))
	f.Add([]byte("version = 1\n[[rule]]\nname = \"e\"\naction = \"warn\"\nreason = \"r\"\nsource = \"s\"\n[rule.when]\nenv = { NCCL_ALGO = \"*ree\" }\nvaries = [\"NCCL_ALGO\"]\nsm_major = 12\n"))
	m, err := Parse("m.toml", []byte("[axes]\na = [1, 2]\nn = [\"r\", \"t\"]\nsm = \"12.0\"\n[presets.n.r]\nNCCL_ALGO = \"Ring\"\n[presets.n.t]\nNCCL_ALGO = \"Tree\"\n[launch]\ncommand = [\"serve\", \"--x\", \"{{.a}}\"]\n"))
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := ParseRules("r.toml", data, m)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		p := filepath.Join(dir, "r.toml")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		x, err := m.Expand(ExpandOptions{RuleFiles: []string{p}, NoDefaultRules: true})
		if err != nil {
			t.Fatalf("rules that parse failed to run: %v", err)
		}
		if len(x.Rules) != len(rules) || len(x.Cells) != 4 {
			t.Fatalf("%d rules, %d cells", len(x.Rules), len(x.Cells))
		}
	})
}

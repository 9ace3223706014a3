package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// A small synthetic gate file and the diff that widens it; shaped like the
// C4 communicator gate, not copied from it.
const testDiff = `diff --git a/python/sglang/srt/layers/comm.py b/python/sglang/srt/layers/comm.py
--- a/python/sglang/srt/layers/comm.py
+++ b/python/sglang/srt/layers/comm.py
@@ -1,3 +1,4 @@
 _is_sm90_supported = is_sm90()
+_is_sm120_supported = is_sm120()
 def gate():
-    return _is_sm90_supported
+    return _is_sm90_supported or _is_sm120_supported
`

const testTOML = `name = "demo"
project = "sglang"
summary = "demo"

[requires]
gpu_sm_major = [12]
cuda_min = "12.9"

[[variant]]
name = "v1"
versions = ">= 0.5.0, < 0.6"
diffs = ["demo/a.diff"]

[[verify]]
file = "python/sglang/srt/layers/comm.py"
contains = "_is_sm120_supported"
`

func catFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for k, v := range files {
		m[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return m
}

func TestLoadCatalogFSGood(t *testing.T) {
	ps, err := LoadFS(catFS(map[string]string{"demo.toml": testTOML, "demo/a.diff": testDiff}), "cat", "cat")
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 {
		t.Fatalf("got %d patches", len(ps))
	}
	p := ps[0]
	if p.Name != "demo" || p.Project != "sglang" || len(p.Variants) != 1 || len(p.Variants[0].Files) != 1 {
		t.Fatalf("unexpected patch %+v", p)
	}
	if p.Requires.CUDAMin != "12.9" || len(p.Requires.GPUSMMajor) != 1 || p.Requires.GPUSMMajor[0] != 12 {
		t.Fatalf("requires: %+v", p.Requires)
	}
	if p.Digest == "" || len(p.Verify) != 1 {
		t.Fatalf("digest %q verify %v", p.Digest, p.Verify)
	}
	ps, err = LoadFS(catFS(map[string]string{"demo.toml": strings.Replace(testTOML, "cuda_min = \"12.9\"\n", "cuda_min = \"12.9\"\ntp = [2]\np2p = true\nnvlink = false\n", 1), "demo/a.diff": testDiff}), "cat", "cat")
	if err != nil {
		t.Fatal(err)
	}
	if r := ps[0].Requires; len(r.TP) != 1 || r.TP[0] != 2 || !r.P2PAll || r.NVLink == nil || *r.NVLink {
		t.Fatalf("tp/p2p/nvlink: %+v", r)
	}
}

func TestLoadCatalogFSErrors(t *testing.T) {
	variant := func(versions, diff string) string {
		return "[[variant]]\nversions = \"" + versions + "\"\ndiffs = [\"" + diff + "\"]\n"
	}
	head := "name = \"demo\"\nproject = \"sglang\"\n"
	outside := strings.ReplaceAll(testDiff, "python/sglang/srt/layers/comm.py", "setup.py")
	dotdot := strings.ReplaceAll(testDiff, "python/sglang/srt/layers/comm.py", "python/sglang/../../etc/passwd")
	abs := strings.ReplaceAll(testDiff, "a/python/sglang/srt/layers/comm.py", "/etc/passwd")
	badCount := strings.Replace(testDiff, "@@ -1,3 +1,4 @@", "@@ -1,5 +1,4 @@", 1)
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"bad toml", map[string]string{"demo.toml": head + "summary = \"x\n"}, "cat/demo.toml:3:"},
		{"unknown key top", map[string]string{"demo.toml": head + "verison = 1\n" + variant("", "demo/a.diff"), "demo/a.diff": testDiff}, `cat/demo.toml:3: unknown key "verison"`},
		{"unknown key in variant", map[string]string{"demo.toml": head + "[[variant]]\ndiffs = [\"demo/a.diff\"]\n\n[[variant]]\nversion = \"1\"\ndiffs = [\"demo/a.diff\"]\n", "demo/a.diff": testDiff}, `cat/demo.toml:7: unknown key "variant.version"`},
		{"unknown table", map[string]string{"demo.toml": head + "[require]\ncuda_min = \"12.9\"\n" + variant("", "demo/a.diff"), "demo/a.diff": testDiff}, `cat/demo.toml:3: unknown key "require"`},
		{"bad package constraint, inline table", map[string]string{"demo.toml": head + "[requires]\ncuda_min = \"12.9\"\npackages = { torch = \">= 2.9\", zz = \">= banana\", aa = \"~= x\" }\n" + variant("", "demo/a.diff"), "demo/a.diff": testDiff}, `cat/demo.toml:5: requires.packages.aa: `},
		{"bad package constraint, table", map[string]string{"demo.toml": head + "[requires.packages]\ntorch = \">= 2.9\"\nzz = \">= banana\"\n" + variant("", "demo/a.diff"), "demo/a.diff": testDiff}, `cat/demo.toml:5: requires.packages.zz: `},
		{"mode change only", map[string]string{"demo.toml": head + variant("", "demo/a.diff"), "demo/a.diff": "diff --git a/python/sglang/run.sh b/python/sglang/run.sh\nold mode 100644\nnew mode 100755\n"}, "cat/demo/a.diff:1: python/sglang/run.sh: mode changes are not supported (100644 -> 100755)"},
		{"mode change with hunks", map[string]string{"demo.toml": head + variant("", "demo/a.diff"), "demo/a.diff": strings.Replace(testDiff, "comm.py\n", "comm.py\nold mode 100644\nnew mode 100755\n", 1)}, "mode changes are not supported"},
		{"name mismatch", map[string]string{"demo.toml": "name = \"other\"\nproject = \"sglang\"\n"}, `cat/demo.toml:1: name "other" does not match the file name "demo.toml"`},
		{"unknown project", map[string]string{"demo.toml": "name = \"demo\"\nproject = \"vllm\"\n"}, `cat/demo.toml:2: unknown project "vllm"`},
		{"no variant", map[string]string{"demo.toml": head}, "no [[variant]]"},
		{"overlap", map[string]string{"demo.toml": head + variant(">= 0.5.0, < 0.5.7", "demo/a.diff") + variant(">= 0.5.6", "demo/a.diff"), "demo/a.diff": testDiff}, "cat/demo.toml:7: variant \">= 0.5.6\" (>= 0.5.6) overlaps variant \">= 0.5.0, < 0.5.7\""},
		{"overlap any", map[string]string{"demo.toml": head + "[[variant]]\nname=\"a\"\ndiffs = [\"demo/a.diff\"]\n" + variant(">= 0.5.6", "demo/a.diff"), "demo/a.diff": testDiff}, "overlaps variant \"a\""},
		{"bad constraint", map[string]string{"demo.toml": head + variant(">= banana", "demo/a.diff"), "demo/a.diff": testDiff}, "cat/demo.toml:4: variant \">= banana\": versions"},
		{"missing diff", map[string]string{"demo.toml": head + variant("", "demo/missing.diff")}, "cat/demo.toml:5: variant \"any\": diff cat/demo/missing.diff: file not found"},
		{"diff path dotdot", map[string]string{"demo.toml": head + variant("", "../x.diff")}, "path leaves the tree"},
		{"diff path absolute", map[string]string{"demo.toml": head + variant("", "/x.diff")}, "absolute path"},
		{"target outside project", map[string]string{"demo.toml": head + variant("", "demo/a.diff"), "demo/a.diff": outside}, "cat/demo/a.diff:1: setup.py is outside sglang's tree"},
		{"target dotdot", map[string]string{"demo.toml": head + variant("", "demo/a.diff"), "demo/a.diff": dotdot}, "cat/demo/a.diff:"},
		{"target absolute", map[string]string{"demo.toml": head + variant("", "demo/a.diff"), "demo/a.diff": abs}, "cat/demo/a.diff:"},
		{"corrupt hunk", map[string]string{"demo.toml": head + variant("", "demo/a.diff"), "demo/a.diff": badCount}, "cat/demo/a.diff:"},
		{"verify outside", map[string]string{"demo.toml": head + variant("", "demo/a.diff") + "[[verify]]\nfile = \"setup.py\"\ncontains = \"x\"\n", "demo/a.diff": testDiff}, "cat/demo.toml:7: [[verify]] file: setup.py is outside"},
		{"verify empty", map[string]string{"demo.toml": head + variant("", "demo/a.diff") + "[[verify]]\nfile = \"python/sglang/x.py\"\n", "demo/a.diff": testDiff}, "needs contains, not_contains, regex or not_regex"},
		{"bad sm", map[string]string{"demo.toml": head + "[requires]\ngpu_sm_major = [0]\n"}, "cat/demo.toml:4: gpu_sm_major"},
		{"bad status", map[string]string{"demo.toml": head + "[upstream]\nstatus = \"maybe\"\n"}, "cat/demo.toml:4: [upstream] status \"maybe\": one of local, open, closed, merged"},
		{"bad tp", map[string]string{"demo.toml": head + "[requires]\ntp = [2, 0]\n" + variant("", "demo/a.diff"), "demo/a.diff": testDiff}, "cat/demo.toml:4: requires.tp: 0 is not a tensor-parallel size"},
		{"p2p false", map[string]string{"demo.toml": head + "[requires]\np2p = false\n" + variant("", "demo/a.diff"), "demo/a.diff": testDiff}, "cat/demo.toml:4: requires.p2p = false"},
		{"wrong type", map[string]string{"demo.toml": head + "links = \"x\"\n"}, "cat/demo.toml:3:"},
		{"huge diff", map[string]string{"demo.toml": head + variant("", "demo/a.diff"), "demo/a.diff": testDiff + strings.Repeat("+x\n", MaxDiffSize/3)}, "cat/demo.toml:5: variant \"any\": diff cat/demo/a.diff: larger than 16 MiB: not read"},
		{"summary with an escape", map[string]string{"demo.toml": "name = \"demo\"\nproject = \"sglang\"\nsummary = \"a\\u001b[2Jb\"\n"}, `cat/demo.toml:3: summary: control character U+001B at byte 1: not allowed in catalog text`},
		{"summary with a carriage return", map[string]string{"demo.toml": "name = \"demo\"\nproject = \"sglang\"\nsummary = \"ok\\rspoof\"\n"}, `cat/demo.toml:3: summary: control character U+000D`},
		{"summary with a bidi override", map[string]string{"demo.toml": "name = \"demo\"\nproject = \"sglang\"\nsummary = \"a\\u202eb\"\n"}, `cat/demo.toml:3: summary: control character U+202E`},
		{"variant name with a newline", map[string]string{"demo.toml": head + "[[variant]]\nname = \"a\\nb\"\ndiffs = [\"demo/a.diff\"]\n", "demo/a.diff": testDiff}, `cat/demo.toml:4: variant name: control character U+000A`},
		{"verify what with an escape", map[string]string{"demo.toml": head + variant("", "demo/a.diff") + "[[verify]]\nfile = \"python/sglang/x.py\"\nwhat = \"\\u001b]52;c;x\\u0007\"\ncontains = \"x\"\n", "demo/a.diff": testDiff}, `cat/demo.toml:8: [[verify]] #1: what: control character U+001B`},
		{"link not a URL", map[string]string{"demo.toml": head + "links = [\"javascript:alert(1)\"]\n"}, `cat/demo.toml:3: links[0] "javascript:alert(1)": not an http(s) URL`},
		{"pr not a URL", map[string]string{"demo.toml": head + "[upstream]\npr = \"#123\"\n"}, `cat/demo.toml:4: [upstream] pr "#123": not an http(s) URL`},
		{"link with a newline", map[string]string{"demo.toml": head + "[upstream]\nlink = \"https://x.org/\\nspoof\"\n"}, `cat/demo.toml:4: [upstream] link: control character U+000A in a URL`},
		{"merged_in neither", map[string]string{"demo.toml": head + "[upstream]\nstatus = \"merged\"\nmerged_in = \"last week\"\n"}, `cat/demo.toml:5: [upstream] merged_in "last week": neither a version nor a commit`},
		{"merged_in while open", map[string]string{"demo.toml": head + "[upstream]\nstatus = \"open\"\nmerged_in = \"0.5.20\"\n"}, `cat/demo.toml:5: [upstream] merged_in with status = "open"`},
		{"upstream unknown key", map[string]string{"demo.toml": head + "[upstream]\nstatus = \"open\"\nmerged = true\n"}, `cat/demo.toml:5: unknown key "upstream.merged"`},
		{"bad dist name", map[string]string{"demo.toml": head + "[requires.packages]\n\"tor\\u001bch\" = \">= 2\"\n"}, `requires.packages: "tor\x1bch" is not a distribution name`},
		{"path with a newline", map[string]string{"demo.toml": head + variant("", "demo/a.diff"), "demo/a.diff": strings.ReplaceAll(testDiff, "layers/comm.py", "layers/comm\x1b[2Jx.py")}, `control character U+001B in a path`},
		{"order negative", map[string]string{"demo.toml": head + "order = -1\n"}, `cat/demo.toml:3: order = -1: a place in the directory's series`},
		{"too many variants", map[string]string{"demo.toml": head + strings.Repeat("[[variant]]\ndiffs = [\"demo/a.diff\"]\n", MaxVariants+1), "demo/a.diff": testDiff}, `65 variants, more than the 64 a patch may have`},
		{"diff is a directory", map[string]string{"demo.toml": head + variant("", "demo/a.diff"), "demo/a.diff/x": testDiff}, "diff cat/demo/a.diff: not a regular file (a directory): not read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadFS(catFS(tt.files), "cat", "cat")
			if err == nil {
				t.Fatalf("loaded; want error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q\nwant it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

func TestOverlapDisjoint(t *testing.T) {
	head := "name = \"demo\"\nproject = \"sglang\"\n"
	for _, ranges := range [][2]string{
		{">= 0.5.0, < 0.5.7", ">= 0.5.7"},
		{"< 0.5.3rc2", ">= 0.5.3rc2, < 0.6"},
		{"<= 0.5.6.post2", "> 0.5.6.post2"},
		{"== 0.5.6", "== 0.5.7"},
	} {
		toml := head + "[[variant]]\nversions = \"" + ranges[0] + "\"\ndiffs = [\"demo/a.diff\"]\n" +
			"[[variant]]\nversions = \"" + ranges[1] + "\"\ndiffs = [\"demo/a.diff\"]\n"
		if _, err := LoadFS(catFS(map[string]string{"demo.toml": toml, "demo/a.diff": testDiff}), "cat", "cat"); err != nil {
			t.Errorf("%v: %v", ranges, err)
		}
	}
}

func writeCatalog(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for k, v := range files {
		p := filepath.Join(dir, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCatalogOverridesAndGet(t *testing.T) {
	builtin := catFS(map[string]string{"demo.toml": testTOML, "demo/a.diff": testDiff})
	user := t.TempDir()
	writeCatalog(t, user, map[string]string{"demo.toml": testTOML, "demo/a.diff": testDiff})
	if _, err := New(builtin, []string{user}); err == nil || !strings.Contains(err.Error(), "overrides = true") {
		t.Fatalf("override without overrides=true: %v", err)
	}
	writeCatalog(t, user, map[string]string{"demo.toml": "overrides = true\n" + testTOML})
	c, err := New(builtin, []string{user})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Get("demo")
	if err != nil || p.Origin != user || !p.Overrides {
		t.Fatalf("Get: %+v %v", p, err)
	}
	if _, err := c.Get("dmeo"); err == nil || !strings.Contains(err.Error(), `did you mean "demo"`) {
		t.Fatalf("did-you-mean: %v", err)
	}
	if _, err := c.Get("dem"); err == nil || !strings.Contains(err.Error(), `did you mean "demo"`) {
		t.Fatalf("substring: %v", err)
	}
	if _, err := c.Get("something-else-entirely"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Fatalf("far name: %v", err)
	}
	if len(c.ForProject("sglang")) != 1 || len(c.ForProject("flashinfer")) != 0 {
		t.Fatal("ForProject")
	}
	d1 := c.Digest()
	writeCatalog(t, user, map[string]string{"demo/a.diff": testDiff + " \n"})
	c2, err := New(builtin, []string{user})
	if err == nil && c2.Digest() == d1 {
		t.Fatal("digest did not change with a diff file")
	}
	// Two user catalogs with one name.
	other := t.TempDir()
	writeCatalog(t, other, map[string]string{"demo.toml": "overrides = true\n" + testTOML, "demo/a.diff": testDiff})
	writeCatalog(t, user, map[string]string{"demo/a.diff": testDiff})
	if _, err := New(builtin, []string{user, other}); err == nil || !strings.Contains(err.Error(), "also defined") {
		t.Fatalf("duplicate user patch: %v", err)
	}
	if _, err := New(builtin, []string{filepath.Join(user, "nope")}); err == nil {
		t.Fatal("missing catalog dir loaded")
	}
	// One directory named twice (--catalog and $SMPATCH_CATALOG, or
	// through a symlink) is loaded once.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(user, link); err != nil {
		t.Fatal(err)
	}
	c3, err := New(builtin, []string{user, user + "/", link})
	if err != nil {
		t.Fatalf("one catalog named three times: %v", err)
	}
	if p, err := c3.Get("demo"); err != nil || p.Origin != user {
		t.Fatalf("Get: %+v %v", p, err)
	}
}

func TestBuiltinCatalogLoads(t *testing.T) {
	c, err := Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.All() {
		if p.Origin != BuiltinOrigin || !strings.HasPrefix(p.File, "patches/catalog/") {
			t.Errorf("%s: origin %q file %q", p.Name, p.Origin, p.File)
		}
	}
}

// FuzzLoadCatalog feeds arbitrary TOML and diff text to the loader: it must
// return a patch or a one-line error, never panic.
func FuzzLoadCatalog(f *testing.F) {
	f.Add(testTOML, testDiff)
	f.Add("name = \"demo\"\nproject = \"sglang\"\n[[variant]]\nversions = \">= 1\"\ndiffs = [\"demo/a.diff\"]\n[[variant]]\nversions = \"< 1\"\ndiffs = [\"demo/a.diff\"]\n", testDiff)
	f.Add("name = \"demo\"\nverison = 1\n", "")
	f.Add("name = \"demo\"\nproject = \"sglang\"\nsummary = \"\"\"a\n\tb\"\"\"\n[[variant]]\nname = \"x\"\npredicted = \"p\\nq\"\ndiffs = [\"demo/a.diff\"]\n", testDiff)
	f.Add("[[variant]]\n[[variant]]\nx=1\n", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
	f.Add("name = \"demo\"\nproject = \"sglang\"\n[upstream]\nmarker_file=\"python/sglang/x.py\"\n", "")
	f.Fuzz(func(t *testing.T, toml, diff string) {
		ps, err := LoadFS(catFS(map[string]string{"demo.toml": toml, "demo/a.diff": diff}), "cat", "cat")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		for _, p := range ps {
			if p.Name != "demo" || len(p.Variants) == 0 {
				t.Fatalf("loaded an invalid patch: %+v", p)
			}
			// What the catalog shows holds no control character, not
			// even a line break.
			shown := append([]string{p.Summary, p.Upstream.PR, p.Upstream.Link}, p.Links...)
			for _, v := range p.Variants {
				shown = append(shown, v.Name, v.Predicted)
			}
			for _, u := range p.Uncovered {
				shown = append(shown, u.String())
			}
			for _, r := range p.Verify {
				shown = append(shown, r.What)
			}
			for _, x := range shown {
				if r, _, bad := badRune(x, false); bad {
					t.Fatalf("loaded text %q holds %U", x, r)
				}
			}
		}
	})
}

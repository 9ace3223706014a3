package synth

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The embedded copies must be exactly the fixtures in testdata/shapes
// (go generate ./internal/synth refreshes them).
func TestShapesMatchTestdata(t *testing.T) {
	src, err := filepath.Glob("../../../testdata/shapes/*.txtar")
	if err != nil || len(src) == 0 {
		t.Fatalf("no fixtures in testdata/shapes: %v", err)
	}
	if got, want := len(Shapes()), len(src); got != want {
		t.Fatalf("embedded %d shapes, testdata has %d; run go generate ./internal/synth", got, want)
	}
	for _, p := range src {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := shapesFS.ReadFile("shapes/" + filepath.Base(p))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("shapes/%s differs from %s; run go generate ./internal/synth", filepath.Base(p), p)
		}
	}
}

func TestShapesHaveCommentAndVersion(t *testing.T) {
	for _, s := range Shapes() {
		if c := Comment(s); !strings.Contains(strings.ToLower(c), "shape") {
			t.Errorf("%s: leading comment does not say which upstream shape it stands for: %q", s, c)
		}
		tree := SGLangTree(s, false)
		v, ok := tree["python/sglang/version.py"]
		if !ok || !bytes.HasPrefix(v, []byte("__version__ = \"")) {
			t.Errorf("%s: no python/sglang/version.py literal", s)
		}
	}
}

func TestUnknownShape(t *testing.T) {
	for _, s := range []string{"", "nope", "../c4-s3", "c4-s3/x"} {
		if tree := SGLangTree(s, true); tree != nil {
			t.Errorf("SGLangTree(%q) = %d files, want nil", s, len(tree))
		}
	}
}

func TestFullSize(t *testing.T) {
	for _, s := range Shapes() {
		small := SGLangTree(s, false)
		full := SGLangTree(s, true)
		if len(small) != len(full) {
			t.Fatalf("%s: %d files small, %d full", s, len(small), len(full))
		}
		for name, data := range small {
			big := full[name]
			target, sized := FullSizes[name]
			if !sized || !bytes.Contains(data, []byte(Marker)) {
				if !bytes.Equal(big, data) {
					t.Errorf("%s %s: changed although it has no target size or marker", s, name)
				}
				continue
			}
			if n := len(big); n < target*95/100 || n > target*105/100 {
				t.Errorf("%s %s: %d bytes, want about %d", s, name, n, target)
			}
			if !isSubsequence(lines(data), lines(big)) {
				t.Errorf("%s %s: lines of the small file are not kept in order", s, name)
			}
		}
		again := SGLangTree(s, true)
		for name := range full {
			if !bytes.Equal(full[name], again[name]) {
				t.Errorf("%s %s: not deterministic", s, name)
			}
		}
	}
}

func TestSizesOfBenchShapes(t *testing.T) {
	full := SGLangTree("c4-s3", true)
	for name, min := range map[string]int{
		"python/sglang/srt/layers/communicator.py": 130_000,
		"python/sglang/srt/server_args.py":         230_000,
	} {
		if len(full[name]) < min {
			t.Errorf("c4-s3 %s: %d bytes, want at least %d", name, len(full[name]), min)
		}
	}
}

// The padded files must still be Python; checked when an interpreter is
// at hand (it is never needed otherwise).
func TestFullSizeCompiles(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	dir := t.TempDir()
	var paths []string
	for _, s := range Shapes() {
		for name, data := range SGLangTree(s, true) {
			if !strings.HasSuffix(name, ".py") {
				continue
			}
			p := filepath.Join(dir, s, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	script := "import ast, sys\nfor p in sys.argv[1:]:\n    ast.parse(open(p, encoding='utf-8').read(), p)\n"
	out, err := exec.CommandContext(ctx, py, append([]string{"-I", "-c", script}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("python3 could not parse the padded files: %v\n%s", err, out)
	}
}

func lines(b []byte) []string { return strings.SplitAfter(string(b), "\n") }

func isSubsequence(small, big []string) bool {
	i := 0
	for _, l := range big {
		if i < len(small) && l == small[i] {
			i++
		}
	}
	return i == len(small)
}

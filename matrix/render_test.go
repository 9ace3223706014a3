package matrix

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/internal/shell"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/render")

// goldenMatrix is the story example with a probe report and refs, so that
// every render output appears: jobs pinned by digest, a pruned cell, a cell
// without an image.
func storyExpansion(t *testing.T, probe *ProbeFacts) *Expansion {
	t.Helper()
	m, err := Load(filepath.Join("..", "examples", "story", "matrix.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m.File = "examples/story/matrix.toml" // stable across machines
	x, err := m.Expand(ExpandOptions{Probe: probe})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestRenderGolden pins every file of a host matrix's render (the story's,
// with its Jobs, is pinned in launch).
func TestRenderGolden(t *testing.T) {
	host, err := Load(filepath.Join("testdata", "host.toml"))
	if err != nil {
		t.Fatal(err)
	}
	host.File = "testdata/host.toml"
	x, err := host.Expand(ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := Render(x, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, filepath.Join("testdata", "render", "host"), files)
}

func checkGolden(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if *update {
		os.RemoveAll(dir)
		for name, data := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	var want []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			want = append(want, filepath.ToSlash(rel))
		}
		return nil
	})
	got := sortedKeys(files)
	if !slices.Equal(got, want) {
		t.Fatalf("files = %q\nwant %q (go test ./matrix -run TestRenderGolden -update)", got, want)
	}
	for _, name := range got {
		w, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if !bytes.Equal(files[name], w) {
			t.Errorf("%s differs from the golden file (go test ./matrix -run TestRenderGolden -update):\n%s", name, files[name])
		}
	}
}

func TestRenderIndexAndGitHub(t *testing.T) {
	x := storyExpansion(t, nil)
	files, err := Render(x, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Cells []struct {
			ID       string
			Runnable bool
			Pruned   *Decision
		}
	}
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Cells) != 12 || idx.Cells[5].Runnable || idx.Cells[5].Pruned == nil || idx.Cells[5].Pruned.Rule != "nccl-tree-cuda-graphs" {
		t.Errorf("index = %+v", idx)
	}
	var gh struct{ Include []map[string]string }
	if err := json.Unmarshal(files["github-matrix.json"], &gh); err != nil {
		t.Fatal(err)
	}
	if len(gh.Include) != 9 || gh.Include[0]["id"] != "unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5" || gh.Include[0]["nccl"] != "default" {
		t.Errorf("github matrix = %+v", gh)
	}
}

func TestGitHubMatrixSplits(t *testing.T) {
	x := expand(t, "[axes]\na = "+intRange(300)+"\n"+launch, ExpandOptions{MaxCells: 300, NoDefaultRules: true})
	files := githubMatrix(x)
	if len(files) != 2 {
		t.Fatalf("files = %v", sortedKeys(files))
	}
	for name, want := range map[string]int{"github-matrix-1.json": 256, "github-matrix-2.json": 44} {
		var gh struct{ Include []map[string]string }
		if err := json.Unmarshal(files[name], &gh); err != nil || len(gh.Include) != want {
			t.Errorf("%s: %d entries, %v", name, len(gh.Include), err)
		}
	}
}

func intRange(n int) string {
	var s []string
	for i := 0; i < n; i++ {
		s = append(s, strconv.Itoa(i))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func TestWriteRender(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("{}"), "a/run.sh": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a", "run.sh")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("run.sh: %v %v", fi, err)
	}
	// A second render replaces the first: stale cells go.
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("{}"), "b/run.sh": []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Errorf("stale cell dir kept: %v", err)
	}
	// A directory that is not ours is refused and left alone.
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644)
	if err := WriteRender(other, map[string][]byte{"index.json": []byte("{}")}); err == nil {
		t.Fatal("overwrote a directory not written by render")
	}
	if b, _ := os.ReadFile(filepath.Join(other, "notes.txt")); string(b) != "mine" {
		t.Error("foreign directory changed")
	}
}

// TestRenderRelativeWorkdir: run.sh runs on this host (by hand, from
// slurm.sbatch), so a relative workdir is taken from the matrix file's
// directory, as matrix run does.
func TestRenderRelativeWorkdir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.toml")
	src := `name = "wd"
project = "sglang"
[base]
image = "registry.example/sglang:1"
[axes]
mode = ["a"]
[launch]
command = ["python3", "bench.py", "--tp", "1"]
workdir = "scripts"
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Expand(ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := Render(x, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "cd " + shell.Quote(filepath.Join(dir, "scripts")) + "\n"
	if !strings.Contains(string(files["a/run.sh"]), want) {
		t.Errorf("run.sh lacks %q:\n%s", want, files["a/run.sh"])
	}
}

// TestRenderHostileText checks that text from a matrix file never becomes
// a command in run.sh or slurm.sbatch: control characters in names and
// reasons are escaped in comments, and ids are quoted.
func TestRenderHostileText(t *testing.T) {
	src := `name = "n"
[axes]
x = ["a", "b"]
[launch]
command = ["python3", "-c", "print(1)"]
`
	if _, err := Parse("m.toml", []byte(strings.Replace(src, `print(1)`, `print(1)\ntouch /tmp/pwned-arg`, 1))); err == nil || !strings.Contains(err.Error(), "m.toml:5: launch.command[2]: value") {
		t.Errorf("a line break in launch.command: %v", err)
	}
	m, err := Parse("m.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	// What Load refuses, a program may still set.
	m.Name = "evil\ntouch /tmp/pwned-name\r\x1b]52;c;AAAA\x07"
	m.File = "dir/x\ntouch /tmp/pwned-file.toml"
	x, err := m.Expand(ExpandOptions{NoDefaultRules: true})
	if err != nil {
		t.Fatal(err)
	}
	files, err := Render(x, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if !strings.HasSuffix(name, ".sh") && !strings.HasSuffix(name, ".sbatch") {
			continue
		}
		if strings.ContainsAny(string(b), "\r\x1b\x07") {
			t.Errorf("%s holds raw control characters", name)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "touch") {
				t.Errorf("%s: a line became a command: %q", name, line)
			}
		}
	}
}

// TestMatrixControlCharacters checks that Load refuses control
// characters in the name and line breaks in env values, with file:line.
func TestMatrixControlCharacters(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"name = \"a\\nb\"\n[axes]\nx = [1]\n[launch]\ncommand = [\"x\"]\n", "m.toml:1: name"},
		{"name = \"a\"\n[axes]\nx = [1]\n[launch]\ncommand = [\"x\"]\nenv = { A = \"1\\nB=2\" }\n", "m.toml:6: launch.env.A"},
		{"name = \"a\"\n[axes]\nn = [\"p\"]\n[presets.n.p]\nNCCL_X = \"1\\r\"\n[launch]\ncommand = [\"x\"]\n", "m.toml:5: presets.n.p.NCCL_X"},
	} {
		_, err := Parse("m.toml", []byte(tc.src))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %s...", tc.src, err, tc.want)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "a\nb.toml")
	os.WriteFile(p, []byte("name = \"a\"\n"), 0o644)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("file name with a newline: %v", err)
	}
	// An axis value with a line break is refused at load, with its line;
	// a value that only a template makes is refused when it is made,
	// naming the cell.
	src := "name = \"a\"\n[axes]\nx = [\"1\\nrm -rf ~\"]\n[launch]\ncommand = [\"x\"]\nenv = { V = \"{{.x}}\" }\n"
	if _, err := Parse("m.toml", []byte(src)); err == nil || !strings.HasPrefix(err.Error(), "m.toml:3: axes.x: value") {
		t.Errorf("an axis value with a line break: %v", err)
	}
	src = "name = \"a\"\n[axes]\nx = [\"1\"]\n[launch]\ncommand = [\"x\"]\nenv = { V = '{{.x}}{{printf \"%c\" 10}}rm -rf ~' }\n"
	m, err := Parse("m.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Expand(ExpandOptions{NoDefaultRules: true}); err == nil || !strings.Contains(err.Error(), "m.toml:6: cell 1: env V") {
		t.Errorf("templated env with a newline expanded: %v", err)
	}
}

// TestWriteRenderMarker checks that only a directory holding an earlier
// render's marker is replaced: one that merely has an index.json is not.
func TestWriteRenderMarker(t *testing.T) {
	user := t.TempDir()
	os.WriteFile(filepath.Join(user, "index.json"), []byte(`{"mine": true}`), 0o644)
	err := WriteRender(user, map[string][]byte{"index.json": []byte("{}")})
	if !errors.Is(err, ErrNotRendered) {
		t.Fatalf("replaced a user's directory with an index.json: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(user, "index.json")); string(b) != `{"mine": true}` {
		t.Error("user's index.json changed")
	}
	os.WriteFile(filepath.Join(user, RenderMarker), []byte(`{"format": "smpatch-render", "version": 99}`), 0o644)
	if err := WriteRender(user, map[string][]byte{"index.json": []byte("{}")}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("newer marker: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, RenderMarker)); err != nil {
		t.Fatalf("no marker written: %v", err)
	}
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("{}")}); err != nil {
		t.Errorf("second render refused: %v", err)
	}
}

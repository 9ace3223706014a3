package matrix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second render replaces the files the first wrote and nothing else: the
// logs run.sh wrote beside them and a Slurm job's slurm-*.out stay.
func TestRenderKeepsWhatItDidNotWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("1"), "a/run.sh": []byte("x"), "b/run.sh": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	keep := map[string]string{"a/a.log": "the server's log\n", "slurm-12_0.out": "the task's output\n", "b/b.log": "b's log\n"}
	for name, body := range keep {
		os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), []byte(body), 0o644)
	}
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("2"), "a/run.sh": []byte("y")}); err != nil {
		t.Fatal(err)
	}
	for name, body := range keep {
		if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name))); err != nil || string(b) != body {
			t.Errorf("%s: %q, %v", name, b, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a", "run.sh")); string(b) != "y" {
		t.Errorf("a/run.sh not replaced: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "b", "run.sh")); !os.IsNotExist(err) {
		t.Errorf("b/run.sh, no longer rendered, was kept: %v", err)
	}
	// A name to render that holds a file render did not write is refused,
	// and nothing changes.
	os.WriteFile(filepath.Join(dir, "SUMMARY.md"), []byte("my notes\n"), 0o644)
	err := WriteRender(dir, map[string][]byte{"index.json": []byte("3"), "SUMMARY.md": []byte("x")})
	if err == nil || !strings.Contains(err.Error(), "SUMMARY.md was not written by smpatch matrix render") {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "index.json")); string(b) != "2" {
		t.Errorf("a refused render changed index.json: %q", b)
	}
	// A symlink planted among the rendered files is replaced, its target
	// never written.
	outside := filepath.Join(t.TempDir(), "bashrc")
	os.WriteFile(outside, []byte("mine\n"), 0o644)
	os.Remove(filepath.Join(dir, "a", "run.sh"))
	os.Symlink(outside, filepath.Join(dir, "a", "run.sh"))
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("4"), "a/run.sh": []byte("z")}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("rendered through a link: %v", err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "mine\n" {
		t.Errorf("the link's target changed: %q", b)
	}
	// A cell directory that is a link out is refused, in plain words.
	os.RemoveAll(filepath.Join(dir, "a"))
	os.Symlink(filepath.Dir(outside), filepath.Join(dir, "a"))
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("4"), "a/run.sh": []byte("z")}); err == nil || !strings.HasSuffix(err.Error(), "/a is a symbolic link, where render writes a directory; remove it or choose another --out") {
		t.Errorf("a linked cell directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(outside), "run.sh")); err == nil {
		t.Error("rendered through a linked directory")
	}
	// A marker listing a path out of the directory is not followed.
	os.WriteFile(filepath.Join(dir, RenderMarker), []byte(`{"format": "smpatch-render", "version": 2, "files": ["../x"]}`), 0o644)
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("5")}); !errors.Is(err, ErrNotRendered) {
		t.Errorf("a marker naming ../x: %v", err)
	}
}

// A cell id longer than a file name can carry is refused with its line,
// not left to the file system's "file name too long".
func TestLongCellID(t *testing.T) {
	long := strings.Repeat("v", 300)
	m, err := Parse("m.toml", []byte("name = \"n\"\n[axes]\nx = [\"a\", \"b\"]\ny = [\""+long+"\", \"w\"]\n[launch]\ncommand = [\"true\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Expand(ExpandOptions{NoDefaultRules: true})
	if err == nil || !strings.HasPrefix(err.Error(), "m.toml:4: cell id \"a.vvvv") || !strings.Contains(err.Error(), "is 302 bytes, more than 200") || !strings.Contains(err.Error(), "axis y") {
		t.Errorf("err = %v", err)
	}
	m, err = Parse("m.toml", []byte("name = \"n\"\n[axes]\nx = [\"a\"]\n[[include]]\nx = \"b\"\nid = \""+long+"\"\n[launch]\ncommand = [\"true\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err = m.Expand(ExpandOptions{NoDefaultRules: true}); err == nil || !strings.HasPrefix(err.Error(), "m.toml:4: cell id") || !strings.Contains(err.Error(), "include's id") {
		t.Errorf("err = %v", err)
	}
}

// What the launch section may not hold: a timeout whose sum overflows
// into a negative deadline, a health port out of 1..65535, an image that
// is an option, control characters in what reaches a script.
func TestLaunchValuesRefused(t *testing.T) {
	base := "name = \"n\"\n[axes]\nx = [\"a\"]\n[launch]\ncommand = [\"true\"]\n"
	for extra, want := range map[string]string{
		"startup_timeout = \"2562047h\"\nbench_timeout = \"2562047h\"\n": "m.toml:6: launch.startup_timeout: 2562047h is longer than 720h0m0s",
		"health = \"http://127.0.0.1:99999/health\"\n":                   "m.toml:6: launch.health for a: \"http://127.0.0.1:99999/health\": port 99999 is not 1 to 65535",
		"health = \"http://127.0.0.1:{{.x}}/\"\n":                        "m.toml:6: launch.health for a: \"http://127.0.0.1:a/\" is not an http(s) URL",
		"workdir = \"a\\u001b]52;c;QQ==\\u0007\"\n":                      "m.toml:6: launch.workdir: value",
		"bench = [\"x\", \"\\u0000\"]\n":                                 "m.toml:6: launch.bench[1]: value \"\\x00\" holds a NUL",
	} {
		m, err := Parse("m.toml", []byte(base+extra))
		if err == nil {
			_, err = m.Expand(ExpandOptions{NoDefaultRules: true})
		}
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v, want %s...", extra, err, want)
		}
	}
	for src, want := range map[string]string{
		"name = \"n\"\n[base]\nimage = \"--volume=/:/host\"\n[axes]\nx = [\"a\"]\n[launch]\ncommand = [\"true\"]\n": "m.toml:3: base.image: \"--volume=/:/host\" is not an image reference (it starts with '-'",
		"name = \"n\"\n[base]\nimage = \"a b\"\n[axes]\nx = [\"a\"]\n[launch]\ncommand = [\"true\"]\n":              "m.toml:3: base.image: \"a b\" is not an image reference (it holds a space",
		"name = \"n\"\n[axes]\nx = [\"a\\u001b[2J\"]\n[launch]\ncommand = [\"true\"]\n":                             "m.toml:3: axes.x: value \"a\\x1b[2J\" holds a control character (\\x1b)",
		"name = \"n\"\n[axes]\nn = [\"p\"]\n[presets.n.p]\n\"--x\" = \"1\\n2\"\n[launch]\ncommand = [\"true\"]\n":   "m.toml:5: presets.n.p: --x: value",
	} {
		if _, err := Parse("m.toml", []byte(src)); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v, want %s...", src, err, want)
		}
	}
	p := filepath.Join(t.TempDir(), "refs.json")
	os.WriteFile(p, []byte(`{"a": "--privileged"}`), 0o644)
	if _, err := ReadRefs(p); err == nil || err.Error() != p+`: cell a: "--privileged" is not an image reference (it starts with '-', as an option does)` {
		t.Errorf("refs: %v", err)
	}
}

// A launch template's work is bounded: a range of a billion, nested
// ranges, a template calling itself twice a level, a printf of a gigabyte
// each fail in milliseconds, naming the cell; a signal stops one at once.
func TestTemplateWorkBounded(t *testing.T) {
	for src, want := range map[string]string{
		`{{range 1000000000}}x{{end}}`:                   "template steps",
		`{{range 100000}}{{range 100000}}{{end}}{{end}}`: "template steps",
		`{{printf "%01000000000d" 1}}`:                   "a width or precision past 4096",
		`{{printf "%*d" 1000000000 1}}`:                  "a width from an argument (*)",
		`{{define "a"}}{{template "b" .}}{{template "b" .}}{{end}}{{define "b"}}{{template "c" .}}{{template "c" .}}{{end}}{{define "c"}}{{range 40000}}yy{{end}}{{end}}{{template "a" .}}`: "for one cell",
		`{{range 60000}}{{$.x}}{{$.x}}{{$.x}}{{$.x}}{{$.x}}{{end}}`: "KiB of text for one cell",
	} {
		m, err := Parse("m.toml", []byte("name = 'n'\n[axes]\nx = ['a', 'b']\n[launch]\ncommand = ['"+src+"']\n"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = m.Expand(ExpandOptions{NoDefaultRules: true})
		if !errors.Is(err, ErrTooMuch) || !strings.HasPrefix(err.Error(), "m.toml:5: launch.command for a: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", src, err)
		}
		if d := time.Since(start); d > 15*time.Second { // milliseconds, but -race
			t.Errorf("%s: %s", src, d)
		}
	}
	// Many cells each under the bound still meet the expansion's (lowered
	// here from MaxExpansionSteps, the same code).
	defer func(n int) { expansionSteps = n }(expansionSteps)
	expansionSteps = 1 << 14
	m, err := Parse("m.toml", []byte("name = 'n'\nmax_cells = 400\n[axes]\nx = "+intRange(400)+"\n[launch]\ncommand = ['{{range 200}}{{end}}']\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Expand(ExpandOptions{NoDefaultRules: true}); !errors.Is(err, ErrTooMuch) || !strings.Contains(err.Error(), "for all cells") {
		t.Errorf("400 cells of 200 steps: %v", err)
	}
	m, err = Parse("m.toml", []byte("name = 'n'\n[axes]\nx = ['a']\n[launch]\ncommand = ['{{range 60000}}{{end}}']\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Expand(ExpandOptions{Context: ctx, NoDefaultRules: true}); !errors.Is(err, context.Canceled) {
		t.Errorf("a stopped expansion: %v", err)
	}
}

// A rules file from elsewhere holds at most MaxRules rules, and all the
// rules of an expansion together as many: each is tried on every cell
// (20,000 rules over 64,000 cells once took four minutes, deaf to a
// signal, which the rules' pass now hears every 256 cells).
func TestRulesBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("version = 1\n")
	for i := 0; i <= MaxRules; i++ {
		fmt.Fprintf(&b, "[[rule]]\nname = \"r%d\"\naction = \"warn\"\nreason = \"x\"\nsource = \"https://x\"\n[rule.when]\nenv = { NCCL_ALGO = [\"T%d\"] }\n", i, i)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "rules.toml")
	os.WriteFile(p, []byte(b.String()), 0o644)
	m, err := Parse(filepath.Join(dir, "m.toml"), []byte("name = \"r\"\n[axes]\nx = [1, 2]\n[launch]\ncommand = [\"true\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Expand(ExpandOptions{RuleFiles: []string{p}})
	if err == nil || !strings.HasPrefix(err.Error(), p+":7170: more than 1024 rules in one file") {
		t.Errorf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Expand(ExpandOptions{Context: ctx}); !errors.Is(err, context.Canceled) {
		t.Errorf("a stopped expansion: %v", err)
	}
}

// What every cell carries is bounded: a matrix name of a megabyte (once
// 1.9 GB of render for 2,000 cells), rule text, the rules' warnings over
// all cells, the bytes a render writes.
func TestPerCellTextBounded(t *testing.T) {
	if _, err := Parse("m.toml", []byte("name = \""+strings.Repeat("n", 1000)+"\"\n[axes]\nx = [1]\n[launch]\ncommand = [\"true\"]\n")); err == nil || !strings.Contains(err.Error(), "is 1000 bytes, more than 256") {
		t.Errorf("a long name: %v", err)
	}
	dir := t.TempDir()
	rules := filepath.Join(dir, "r.toml")
	os.WriteFile(rules, []byte("version = 1\n[[rule]]\nname = \"r\"\naction = \"warn\"\nreason = \""+strings.Repeat("r", 3000)+"\"\nsource = \"s\"\n[rule.when]\nenv = { X = [\"*\"] }\n"), 0o644)
	m, err := Parse(filepath.Join(dir, "m.toml"), []byte("name = \"w\"\n[axes]\nx = [1]\n[launch]\ncommand = [\"true\"]\nenv = { X = \"1\" }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Expand(ExpandOptions{RuleFiles: []string{rules}}); err == nil || !strings.Contains(err.Error(), "r.toml:5: rule \"r\": reason of 3000 bytes, more than 2048") {
		t.Errorf("a long reason: %v", err)
	}
	var b strings.Builder
	b.WriteString("version = 1\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "[[rule]]\nname = \"r%d\"\naction = \"warn\"\nreason = \"%s\"\nsource = \"s\"\n[rule.when]\nenv = { X = [\"*\"] }\n", i, strings.Repeat("r", 2000))
	}
	os.WriteFile(rules, []byte(b.String()), 0o644)
	m, err = Parse(filepath.Join(dir, "m.toml"), []byte("name = \"w\"\nmax_cells = 1000\n[axes]\nx = "+intRange(1000)+"\n[launch]\ncommand = [\"true\"]\nenv = { X = \"1\" }\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Expand(ExpandOptions{RuleFiles: []string{rules}}); !errors.Is(err, ErrTooMuch) || !strings.Contains(err.Error(), "the rules' warnings on the cells hold more than 256 MiB") {
		t.Errorf("warnings on every cell: %v", err)
	}
	if err := renderSize(map[string][]byte{"a": make([]byte, MaxRenderBytes), "b": {1}}); !errors.Is(err, ErrTooMuch) {
		t.Errorf("a render past its bound: %v", err)
	}
}

// A regular expression from a matrix file is bounded before it is
// compiled: a metric of megabytes is refused with its line, not compiled
// for a second.
func TestMetricRegexBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.toml")
	src := "name = \"m\"\nproject = \"sglang\"\n[base]\npython = \"python3\"\n[axes]\npatches = [[]]\n[launch]\ncommand = [\"x\"]\nhealth = \"http://127.0.0.1:1/health\"\nbench = [\"true\"]\n[launch.metrics]\n\"tok/s\" = '(" + strings.Repeat("a", 1<<20) + ")'\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), "m.toml:12: launch metric \"tok/s\": a regular expression of 1048578 bytes, more than 4096") {
		t.Fatalf("err = %v", err)
	}
}

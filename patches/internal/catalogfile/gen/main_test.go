package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

// patches/builtin_decoded.go is exactly what this program writes for
// patches/catalog now.
func TestGeneratedFileCurrent(t *testing.T) {
	want, err := Source(os.DirFS("../../../catalog"), "catalog")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../builtin_decoded.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("patches/builtin_decoded.go is not what patches/catalog/ gives now: run `go generate ./patches` (or `make generate`)")
	}
}

// Every shape a catalog file can take is written as a Go literal of its
// value: pointers, maps, plain-string and table entries of uncovered, and
// the generic values of a table (which the loader then checks).
func TestSourceShapes(t *testing.T) {
	fsys := fstest.MapFS{"demo.toml": {Data: []byte(`name = "demo"
project = "sglang"
overrides = true
links = []
uncovered = ["a note with \"quotes\"\nand a newline"]

[requires]
p2p = true
packages = { torch = ">= 2.9", "flashinfer-python" = "< 1" }

[[variant]]
versions = ">= 0.5"
diffs = ["demo/a.diff"]
search = ["python/sglang/srt/"]
`)}, "other.toml": {Data: []byte(`name = "other"
[[uncovered]]
name = 7
window = 1.5
why = true
file = [1, "x"]
`)}}
	src, err := genSource(fsys, "cat", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.ParseFile(token.NewFileSet(), "x.go", src, 0); err != nil {
		t.Fatalf("not Go: %v\n%s", err, src)
	}
	flat := strings.Join(strings.Fields(string(src)), " ")
	for _, want := range []string{
		`Overrides: true,`,
		`Links: []string{},`,
		`Uncovered: []catalogfile.Uncovered{ { Text: "a note with \"quotes\"\nand a newline", }, },`,
		`P2P: new(true),`,
		`Packages: map[string]string{ "flashinfer-python": "< 1", "torch": ">= 2.9", },`,
		`Search: []string{ "python/sglang/srt/", },`,
		`Table: map[string]any{ "file": []any{ int64(1), "x", }, "name": int64(7), "why": true, "window": float64(1.5), },`,
		`"github.com/smpatch/smpatch/internal/requires"`,
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("no %s in\n%s", want, src)
		}
	}
}

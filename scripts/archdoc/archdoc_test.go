package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestArchitectureDoc: docs/architecture.md is what `make architecture`
// writes from the packages as they are, and every import goes down the
// layers.
func TestArchitectureDoc(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("SKIP (no go on PATH): the page is made from go list")
	}
	pkgs, err := list("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, problems := render(pkgs)
	for _, p := range problems {
		t.Error(p)
	}
	have, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, doc) {
		t.Errorf("docs/architecture.md is stale: run `make architecture`")
	}
}

// TestLayersRefuseUpwardImports: an import from a lower layer to a higher
// one, or from a layer into test support, is named.
func TestLayersRefuseUpwardImports(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: module + "/source", Imports: []string{module + "/patches"}},
		{ImportPath: module + "/patches", Imports: []string{module + "/internal/testkit/treetest"}},
		{ImportPath: module + "/internal/lazyre"},
		{ImportPath: module + "/internal/tomlfile", Imports: []string{module + "/internal/lazyre"}},
		{ImportPath: module + "/brandnew"},
	}
	_, problems := render(pkgs)
	want := []string{
		`source (layer "trees") imports patches (layer "patches")`,
		"patches imports internal/testkit/treetest, a package for tests",
		"package brandnew is in no layer",
	}
	if len(problems) != len(want) {
		t.Fatalf("problems:\n%s", strings.Join(problems, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(problems[i], w) {
			t.Errorf("problem %d: %q, want it to contain %q", i, problems[i], w)
		}
	}
}

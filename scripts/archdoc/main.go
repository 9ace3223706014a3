// Command archdoc writes docs/architecture.md from `go list`: the packages
// of the module, what each owns (its doc comment's first sentence), its
// size, and the direction of its imports, layer by layer. Its test fails
// when the page is stale or an import runs against the layers.
//
//	go run ./scripts/archdoc > docs/architecture.md    (make architecture)
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
)

const module = "github.com/smpatch/smpatch"

// layers are the module's packages from the bottom up: a package may import
// those of lower layers only (and, in the leaf layer, other leaves). A
// package of the module in no layer is an error, so a new package gets its
// place on purpose. Test support packages are imported by tests, benchmarks
// and demos only.
var layers = []struct {
	name string
	pkgs []string // import paths below the module, or a prefix ending in "/"
	note string
}{
	{"leaf helpers", []string{"internal/bounded", "internal/confined", "internal/ctxio", "internal/interrupt", "internal/lazyre", "internal/lru", "internal/requires", "internal/runner", "internal/shell", "internal/smver", "internal/termsafe", "internal/textdist", "internal/tomlfile", "internal/junit", "internal/words"}, "small, shared, knowing nothing of smpatch's model; may import each other"},
	{"trees", []string{"source"}, "checkouts, installed packages, image filesystems; versions"},
	{"git", []string{"source/gitrepo"}, "go-git: revisions as trees, the upstream cache, version tags"},
	{"compatibility", []string{"upstream/compat"}, "which sglang and flashinfer releases work together, as measured"},
	{"diffs", []string{"patches/udiff"}, "unified diffs: parse, format, make, match"},
	{"catalog", []string{"patches/catalog"}, "the built-in catalog and catalog directories"},
	{"journal", []string{"patches/journal"}, "what was written to a tree, and how to undo it"},
	{"patches", []string{"patches"}, "the patch set: plan, apply, revert, status"},
	{"authoring", []string{"patches/author"}, "your own patches: new, import, refresh, a conflict finished by hand"},
	{"probe", []string{"probe"}, "what the host and its Python environment can run"},
	{"upstream, matrix", []string{"upstream", "matrix"}, "patches on upstream history; matrices of experiments"},
	{"doctor", []string{"doctor", "doctor/"}, "what a launch will hit on this host, before the model loads"},
	{"image", []string{"image"}, "one OCI image per patch set"},
	{"launch", []string{"launch"}, "running cells, results, triage"},
	{"command line", []string{"cmd/smpatch"}, "the only main: one file per command"},
}

// support are packages for tests, benchmarks and demos: they may import
// anything but the command line, and no package of a layer imports them.
var support = []string{"internal/testkit/", "bench/", "examples/", "testdata/", "scripts/"}

type pkg struct {
	ImportPath string
	Doc        string
	Name       string
	Dir        string
	GoFiles    []string
	Imports    []string
}

func main() {
	pkgs, err := list(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "archdoc:", err)
		os.Exit(1)
	}
	doc, problems := render(pkgs)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "archdoc:", p)
		}
		os.Exit(1)
	}
	os.Stdout.Write(doc)
}

// list is `go list -json ./...` run in dir.
func list(dir string) ([]pkg, error) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func rel(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

func matches(p string, pats []string) bool {
	for _, pat := range pats {
		if p == pat || strings.HasSuffix(pat, "/") && strings.HasPrefix(p, pat) {
			return true
		}
	}
	return false
}

// layerOf is p's layer index, -1 for a support package, -2 for none.
func layerOf(p string) int {
	for i, l := range layers {
		if matches(p, l.pkgs) {
			return i
		}
	}
	if matches(p, support) {
		return -1
	}
	return -2
}

func firstSentence(doc string) string {
	if i := strings.Index(doc, ". "); i >= 0 {
		doc = doc[:i+1]
	}
	return strings.ReplaceAll(doc, "|", "\\|")
}

// render is the page, and every import that runs against the layers.
func render(pkgs []pkg) ([]byte, []string) {
	var problems []string
	byLayer := map[int][]pkg{}
	for _, p := range pkgs {
		r := rel(p.ImportPath)
		li := layerOf(r)
		if li == -2 {
			problems = append(problems, fmt.Sprintf("package %s is in no layer of scripts/archdoc: give it one", r))
			continue
		}
		byLayer[li] = append(byLayer[li], p)
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") && imp != module {
				continue
			}
			ir := rel(imp)
			il := layerOf(ir)
			switch {
			case li == -1: // support may import anything but the command line
				if ir == "cmd/smpatch" {
					problems = append(problems, fmt.Sprintf("%s imports the command line", r))
				}
			case il == -1:
				problems = append(problems, fmt.Sprintf("%s imports %s, a package for tests and benchmarks", r, ir))
			case il > li || il == li && li != 0:
				problems = append(problems, fmt.Sprintf("%s (layer %q) imports %s (layer %q): imports go down the layers only", r, layers[li].name, ir, layerName(il)))
			}
		}
	}
	var b bytes.Buffer
	b.WriteString("# Architecture\n\n")
	b.WriteString("<!-- Generated by `make architecture` (go run ./scripts/archdoc) from `go list`; a test fails when it is stale. -->\n\n")
	b.WriteString("smpatch is one program, `cmd/smpatch`, over library packages in layers. Data flows\n")
	b.WriteString("down and results flow up: a package imports only packages of the layers below\n")
	b.WriteString("its own (the leaf helpers may import each other), and no package of a layer\n")
	b.WriteString("imports the packages that exist for tests, benchmarks and demos. Each package's\n")
	b.WriteString("`doc.go` says what it owns and what it must not know.\n\n")
	b.WriteString("| layer | package | what it owns | imports (of this module) |\n| --- | --- | --- | --- |\n")
	for li := len(layers) - 1; li >= 0; li-- {
		row(&b, layers[li].name, byLayer[li])
	}
	b.WriteString("\nFor tests, benchmarks and demos only:\n\n")
	b.WriteString("| package | what it owns | imports (of this module) |\n| --- | --- | --- |\n")
	sup := byLayer[-1]
	sort.Slice(sup, func(i, j int) bool { return sup[i].ImportPath < sup[j].ImportPath })
	for _, p := range sup {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", rel(p.ImportPath), firstSentence(p.Doc), imports(p))
	}
	b.WriteString("\nThe layers, bottom up:\n\n")
	for i, l := range layers {
		fmt.Fprintf(&b, "%d. **%s**: %s.\n", i+1, l.name, l.note)
	}
	return b.Bytes(), problems
}

func layerName(i int) string {
	if i < 0 {
		return "support"
	}
	return layers[i].name
}

func row(b *bytes.Buffer, layer string, pkgs []pkg) {
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].ImportPath < pkgs[j].ImportPath })
	for i, p := range pkgs {
		name := layer
		if i > 0 {
			name = ""
		}
		fmt.Fprintf(b, "| %s | `%s` | %s | %s |\n", name, rel(p.ImportPath), firstSentence(p.Doc), imports(p))
	}
}

func imports(p pkg) string {
	var out []string
	for _, imp := range p.Imports {
		if strings.HasPrefix(imp, module+"/") {
			out = append(out, "`"+rel(imp)+"`")
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

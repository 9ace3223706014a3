package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The sizes a reader can hold in mind: no Go file over maxFileLines lines,
// no function over maxFuncLines, generated files ("Code generated ... DO
// NOT EDIT.") excepted.
const (
	maxFileLines = 1000
	maxFuncLines = 150
)

// TestSizes walks every Go file of the module, tests included.
func TestSizes(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "node_modules" || (strings.HasPrefix(n, ".") && n != "." && n != "..") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments)
		if err != nil {
			return nil // not ours to judge: testdata that is not Go
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, _ := filepath.Rel("../..", p)
		if n := strings.Count(string(src), "\n"); n > maxFileLines {
			t.Errorf("%s: %d lines, over %d: split it along its seams", rel, n, maxFileLines)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			var name string
			switch x := n.(type) {
			case *ast.FuncDecl:
				body, name = x.Body, x.Name.Name
			case *ast.FuncLit:
				body, name = x.Body, "a function literal"
			}
			if body != nil {
				start := fset.Position(n.Pos()).Line
				if l := fset.Position(body.End()).Line - start + 1; l > maxFuncLines {
					t.Errorf("%s:%d: %s is %d lines, over %d", rel, start, name, l, maxFuncLines)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

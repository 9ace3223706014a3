package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/internal/testkit/synth"
)

func main() {
	shape := flag.String("shape", "c4-s3", "shape to write (see -list)")
	full := flag.Bool("full", false, "pad the target files to upstream size")
	out := flag.String("o", "", "directory to write the tree into (created; must be empty or absent)")
	list := flag.Bool("list", false, "print the shapes and exit")
	flag.Parse()
	if *list {
		fmt.Println(strings.Join(synth.Shapes(), "\n"))
		return
	}
	if err := run(*shape, *full, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(shape string, full bool, out string) error {
	if out == "" {
		return fmt.Errorf("-o DIR is required")
	}
	files := synth.SGLangTree(shape, full)
	if files == nil {
		return fmt.Errorf("unknown shape %q (shapes: %s)", shape, strings.Join(synth.Shapes(), ", "))
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s: not empty", out)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(out, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

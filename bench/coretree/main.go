package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/smpatch/smpatch/internal/testkit/synth"
)

func main() {
	shape := flag.String("shape", "c4-s3", "upstream shape (internal/synth)")
	small := flag.Bool("small", false, "keep the files small (no padding)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: coretree [-shape NAME] [-small] DIR")
		os.Exit(2)
	}
	files := synth.SGLangTree(*shape, !*small)
	if files == nil {
		fmt.Fprintf(os.Stderr, "coretree: unknown shape %q (have %v)\n", *shape, synth.Shapes())
		os.Exit(1)
	}
	dir := flag.Arg(0)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "coretree:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "coretree:", err)
			os.Exit(1)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "python", "sglang", "__init__.py")); err != nil {
		_ = os.WriteFile(filepath.Join(dir, "python", "sglang", "__init__.py"), nil, 0o644)
	}
}

package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/smpatch/smpatch/internal/testkit/gitbuild/checkhist"
)

func main() {
	out := flag.String("out", "", "directory to write repo.git and catalog/ into (must not exist)")
	commits := flag.Int("commits", 500, "number of commits after the first")
	size := flag.Int("size", 250_000, "approximate size of the target file in bytes")
	seed := flag.Uint64("seed", 1, "random seed")
	touch := flag.Int("touch", 10, "percent of commits that change the target file (flashinfer's most edited file, fused_moe/core.py at 282 KB, changed in 7% of the commits from v0.6.0 to v0.6.18rc7)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gencheck: -out DIR is required")
		os.Exit(2)
	}
	info, err := checkhist.Generate(*out, checkhist.Options{Commits: *commits, Size: *size, Touch: *touch, Seed: *seed})
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencheck:", err)
		os.Exit(1)
	}
	fmt.Printf("repo %s: %d commits after v0.6.0, %d%% of them change the target (%d bytes at the end), conflict from commit %d, adopted at commit %d\n",
		info.URL, *commits, *touch, info.TargetSize, info.BreakAt, info.AdoptAt)
}

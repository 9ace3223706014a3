// Command imagebench writes the synthetic base images behind
// bench/image.bench.sh: an OCI layout with random, incompressible layers
// (streamed to disk, never held in memory) under an installed sglang in one
// of the upstream shapes the built-in sm120-fusion patch meets.
//
//	imagebench -dir DIR -bytes N [-layers K] [-shape c5-s5]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/smpatch/smpatch/image/imagetest"
)

func main() {
	dir := flag.String("dir", "", "OCI layout directory to create")
	total := flag.Int64("bytes", 40<<20, "total bytes of the random layers")
	layers := flag.Int("layers", 4, "number of random layers")
	shape := flag.String("shape", "c5-s5", "sglang shape (internal/synth)")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *dir == "" || *layers < 1 {
		fmt.Fprintln(os.Stderr, "usage: imagebench -dir DIR -bytes N [-layers K] [-shape NAME]")
		os.Exit(2)
	}
	d, err := imagetest.Write(*dir, imagetest.Options{
		RandomLayers: *layers,
		RandomBytes:  *total / int64(*layers),
		Seed:         *seed,
		Shape:        *shape,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagebench:", err)
		os.Exit(1)
	}
	fmt.Println(d)
}

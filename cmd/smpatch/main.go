// Command smpatch applies, reverts and checks named source patches for sglang
// and flashinfer, probes what the GPUs and installed libraries support, and
// turns a TOML matrix of environment variants into images, launch specs and runs.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

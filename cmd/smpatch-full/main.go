// Command smpatch-full is smpatch with every command linked in: the lean
// ones and check, checkout, matrix, image and triage, with the libraries
// they need (go-git's transports, Kubernetes, go-containerregistry). smpatch
// runs it for those commands; it can also be run by itself.
package main

import (
	"os"

	"github.com/smpatch/smpatch/internal/cli"
	"github.com/smpatch/smpatch/internal/cli/full"
)

// version and commit are set at build time with -ldflags
// "-X main.version=... -X main.commit=..." (make does).
var version, commit = "dev", ""

func main() {
	cli.Version, cli.Commit = version, commit
	os.Exit(full.Run(os.Args[1:], os.Stdout, os.Stderr))
}

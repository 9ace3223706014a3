package main

import (
	"os"

	"github.com/smpatch/smpatch/internal/cli"
)

// version and commit are set at build time with -ldflags
// "-X main.version=... -X main.commit=..." (make does).
var version, commit = "dev", ""

func main() {
	cli.Version, cli.Commit = version, commit
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
}

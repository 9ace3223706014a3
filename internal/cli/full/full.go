package full

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/cli"
	"github.com/smpatch/smpatch/source/gitrepo"
)

// Program is smpatch-full: package cli's commands and the ones of this
// package, under the name it was invoked as (smpatch, when smpatch hands a
// command over; else smpatch-full).
func Program() cli.Program {
	return cli.Program{
		Name:       cli.InvokedAs("smpatch-full"),
		Commands:   commands,
		Complete:   addCompletions,
		ProbeImage: probeImageStatic,
		TagReader:  gitrepo.NearestTag,
	}
}

// Run executes smpatch-full's command line and returns the exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	return Program().Run(args, stdout, stderr)
}

// commands are the commands smpatch-full adds: cli.Delegated, each with
// the same one line of help.
func commands(g *cli.Globals) []*cobra.Command {
	return []*cobra.Command{
		newCheckCmd(g),
		newCheckoutCmd(g),
		newImageCmd(g),
		newMatrixCmd(g),
		newTriageCmd(g),
		cli.NewVersionTagCmd(gitrepo.NearestTag),
	}
}

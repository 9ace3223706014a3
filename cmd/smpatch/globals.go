package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/exit"
)

// The global flags beyond --catalog and --python: how much is said
// (--verbose, --quiet) and in colour or not (--color).

func (g *globalOptions) addGlobalFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.BoolVarP(&g.Verbose, "verbose", "v", false, "say more: each patch's plan in apply, each cell's command in matrix run, every module in probe")
	pf.BoolVarP(&g.Quiet, "quiet", "q", false, "print results and errors only: no progress or info lines")
	g.addColorFlag(root)
	// --version stays; -v is --verbose.
	root.Flags().Bool("version", false, "print the version (smpatch version --json for more)")
}

// beforeRun checks the global flags, then settles the output convention.
func (g *globalOptions) beforeRun(c *cobra.Command) error {
	g.stderr = c.ErrOrStderr()
	if g.Verbose && g.Quiet {
		return exit.With(exit.Usage, errors.New("--verbose and --quiet: give one"))
	}
	if err := g.applyConfig(c); err != nil {
		return err
	}
	if err := checkColorFlag(g.Color); err != nil {
		return err
	}
	return applyOutputFlags(c, g)
}

// info is w, or nothing with --quiet: for progress and info lines.
func (g *globalOptions) info(w io.Writer) io.Writer {
	if g.Quiet {
		return io.Discard
	}
	return w
}

// detail is w with --verbose, else nothing.
func (g *globalOptions) detail(w io.Writer) io.Writer {
	if g.Verbose {
		return w
	}
	return io.Discard
}

// warnNCCL prints the matrix's NCCL_* names NCCL does not document, one
// warning line each, on standard error (every matrix command loads the
// file through expandMatrix).
func (g *globalOptions) warnNCCL(w string) {
	if g.stderr == nil {
		return // shell completion
	}
	fmt.Fprintf(g.stderr, "smpatch: warning: %s\n", w)
}

package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches/journal"
)

// The global flags beyond --catalog and --python: how much is said
// (--verbose, --quiet) and in colour or not (--color).

func (g *Globals) addGlobalFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.BoolVarP(&g.Verbose, "verbose", "v", false, "say more: each patch's plan in apply, each cell's command in matrix run, every module in probe")
	pf.BoolVarP(&g.Quiet, "quiet", "q", false, "print results and errors only: no progress or info lines")
	g.addColorFlag(root)
	pf.DurationVar(&g.LockTimeout, "lock-timeout", journal.DefaultLockTimeout, "the longest wait for a tree's journal lock another smpatch holds (said after half a second)")
	// --version stays; -v is --verbose.
	root.Flags().Bool("version", false, "print the version (smpatch version --json for more)")
}

// beforeRun checks the global flags, then settles the output convention.
func (g *Globals) beforeRun(c *cobra.Command) error {
	g.stderr = c.ErrOrStderr()
	if g.Verbose && g.Quiet {
		return withCode(exitUsage, errors.New("--verbose and --quiet: give one"))
	}
	if g.LockTimeout <= 0 {
		return withCode(exitUsage, fmt.Errorf("--lock-timeout %s: give a positive duration (1s, 2m)", g.LockTimeout))
	}
	if err := g.applyConfig(c); err != nil {
		return err
	}
	if err := checkColorFlag(g.Color); err != nil {
		return err
	}
	return applyOutputFlags(c, g)
}

// lockOptions are how a command waits for a tree's journal lock: a line
// on w after half a second, at most --lock-timeout.
func (g *Globals) lockOptions(w io.Writer) journal.Options {
	return journal.Options{Waiting: waitingLine(w), LockTimeout: g.LockTimeout}
}

// Info is w, or nothing with --quiet: for progress and info lines.
func (g *Globals) Info(w io.Writer) io.Writer {
	if g.Quiet {
		return io.Discard
	}
	return w
}

// Detail is w with --verbose, else nothing.
func (g *Globals) Detail(w io.Writer) io.Writer {
	if g.Verbose {
		return w
	}
	return io.Discard
}

// WarnNCCL prints the matrix's NCCL_* names NCCL does not document, one
// warning line each, on standard error (every matrix command loads the
// file through expandMatrix).
func (g *Globals) WarnNCCL(w string) {
	if g.stderr == nil {
		return // shell completion
	}
	fmt.Fprintf(g.stderr, "smpatch: warning: %s\n", w)
}

package main

// Command file: journal forget.

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches"
)

// journalForgetOptions are the flags of smpatch journal forget.
type journalForgetOptions struct {
	Repo string
}

func (o *journalForgetOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
}

func newJournalForgetCmd(g *Globals) *cobra.Command {
	o := &journalForgetOptions{}
	c := &cobra.Command{
		Use:   "forget NAME",
		Short: "Drop a journal entry and its copies, keeping every tree file as it is now",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runJournalForget(c.Context(), g, o, args, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	o.AddFlags(c)
	return c
}

func runJournalForget(ctx context.Context, g *Globals, o *journalForgetOptions, args []string, w, errw io.Writer) error {
	t, err := resolveTree(ctx, g, o.Repo, "")
	if err != nil {
		return err
	}
	e, err := patches.ForgetEntry(ctx, t, args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: entry dropped (%s, %d files left as they are)\n", e.Name, e.State, len(e.Files))
	return nil
}

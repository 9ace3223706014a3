package main

// Command file: journal trust.

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches"
)

// journalTrustOptions are the flags of smpatch journal trust.
type journalTrustOptions struct {
	Repo string
	JSON bool
}

func (o *journalTrustOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
}

func newJournalTrustCmd(g *Globals) *cobra.Command {
	o := &journalTrustOptions{}
	c := &cobra.Command{
		Use:   "trust",
		Short: "Adopt the tree's journal as this user's (after reading it): checks it and signs it",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return runJournalTrust(c.Context(), g, o, args, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	o.AddFlags(c)
	return c
}

func runJournalTrust(ctx context.Context, g *Globals, o *journalTrustOptions, args []string, w, errw io.Writer) error {
	t, err := resolveTree(ctx, g, o.Repo, "")
	if err != nil {
		return err
	}
	res, err := patches.TrustJournal(ctx, t)
	if err != nil {
		return err
	}
	if o.JSON {
		return WriteJSON(w, res)
	}
	verb := "trusted"
	if res.Already {
		verb = "already this user's"
	}
	fmt.Fprintf(w, "%s: %s, %d entries\n", res.Path, verb, len(res.Entries))
	for _, e := range res.Entries {
		fmt.Fprintf(w, "  %s: %s, %d files\n", e.Name, e.State, len(e.Files))
		for _, f := range e.Files {
			fmt.Fprintf(w, "    %s\n", patches.DisplayPath(f.Path))
		}
	}
	return nil
}

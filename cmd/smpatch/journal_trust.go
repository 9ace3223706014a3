package main

// Command file: journal trust.

import (
	"io"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/termsafe"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// journalTrustOptions are smpatch journal trust's flags, streams and
// dependencies.
type journalTrustOptions struct {
	IO   IOStreams
	Tree func(ctx context.Context, repo string, project source.Project) (source.WritableTree, error)
	// Lock is how the command waits for the tree's journal lock, saying so on w.
	Lock func(w io.Writer) journal.Options

	Repo string
	JSON bool
}

func (o *journalTrustOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
}

func newJournalTrustCmd(f *Factory) *cobra.Command {
	o := &journalTrustOptions{Tree: f.Tree, Lock: f.lockOptions}
	c := &cobra.Command{
		Use:   "trust",
		Short: "Adopt the tree's journal as this user's (after reading it): checks it and signs it",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.IO = streams(c)
			return runJournalTrust(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runJournalTrust(ctx context.Context, o *journalTrustOptions) error {
	w := o.IO.Out
	t, err := o.Tree(ctx, o.Repo, "")
	if err != nil {
		return err
	}
	res, err := journal.Trust(ctx, t, o.Lock(o.IO.ErrOut))
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
			fmt.Fprintf(w, "    %s\n", termsafe.Line(f.Path))
		}
	}
	return nil
}

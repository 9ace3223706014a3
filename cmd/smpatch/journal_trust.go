package main

// Command file: journal trust.

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/words"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// journalTrustOptions are smpatch journal trust's flags, streams and
// dependencies.
type journalTrustOptions struct {
	IO      IOStreams
	Catalog func() (*patches.Catalog, error)
	Tree    func(ctx context.Context, repo string, project source.Project) (source.WritableTree, error)
	// Lock is how the command waits for the tree's journal lock, saying so on w.
	Lock func(w io.Writer) journal.Options

	Repo    string
	JSON    bool
	AnyFile bool
}

func (o *journalTrustOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
	f.BoolVar(&o.AnyFile, "any-file", false, "also adopt entries naming files their patch in the catalog does not write (never hidden files or files tools run); read the journal first")
}

func newJournalTrustCmd(f *Factory) *cobra.Command {
	o := &journalTrustOptions{Catalog: f.Catalog, Tree: f.Tree, Lock: f.lockOptions}
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
	cat, err := o.Catalog()
	if err != nil {
		return err
	}
	t, err := o.Tree(ctx, o.Repo, "")
	if err != nil {
		return err
	}
	res, err := patches.Trust(ctx, t, cat, patches.TrustOptions{Lock: o.Lock(o.IO.ErrOut), AnyFile: o.AnyFile})
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
	fmt.Fprintf(w, "%s: %s, %s\n", res.Path, verb, words.Count(len(res.Entries), "entry", "entries"))
	if res.BytecodeDropped > 0 {
		fmt.Fprintf(w, "  %d cached bytecode files it would have put back dropped: their modules compile again\n", res.BytecodeDropped)
	}
	for _, e := range res.Entries {
		fmt.Fprintf(w, "  %s: %s, %s\n", e.Name, entryState(e), words.Count(len(e.Files), "file", "files"))
		for _, wr := range res.Writes {
			if wr.Entry == e.Name {
				fmt.Fprintf(w, "    %s\n", wr)
			}
		}
	}
	return nil
}

// entryState says where an adopted entry stands and what finishes it.
func entryState(e *journal.Entry) string {
	switch e.State {
	case journal.Pending:
		return "pending (an interrupted apply: the next command that writes rolls it back)"
	case journal.Reverting:
		return "reverting (an interrupted revert: the next command that writes finishes it)"
	}
	return string(e.State)
}

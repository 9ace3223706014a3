package main

// Command file: journal forget.

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/words"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// journalForgetOptions are smpatch journal forget's flags, streams and
// dependencies.
type journalForgetOptions struct {
	IO   IOStreams
	Tree func(ctx context.Context, repo string, project source.Project) (source.WritableTree, error)
	// Lock is how the command waits for the tree's journal lock, saying so on w.
	Lock func(w io.Writer) journal.Options

	Name string
	Repo string
}

func (o *journalForgetOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
}

func newJournalForgetCmd(f *Factory) *cobra.Command {
	o := &journalForgetOptions{Tree: f.Tree, Lock: f.lockOptions}
	c := &cobra.Command{
		Use:   "forget NAME",
		Short: "Drop a journal entry and its copies, keeping every tree file as it is now",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Name = streams(c), args[0]
			return runJournalForget(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runJournalForget(ctx context.Context, o *journalForgetOptions) error {
	t, err := o.Tree(ctx, o.Repo, "")
	if err != nil {
		return err
	}
	e, err := journal.Forget(ctx, t, o.Name, o.Lock(o.IO.ErrOut))
	if err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "%s: entry dropped (%s, %s left as they are)\n", e.Name, e.State, words.Count(len(e.Files), "file", "files"))
	return nil
}

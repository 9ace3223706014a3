package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// smpatch status: the patches applied to a tree, and any apply or revert
// a kill left in flight. It writes nothing.

// statusOptions are smpatch status's flags, streams and dependencies.
type statusOptions struct {
	IO      IOStreams
	Catalog func() (*patches.Catalog, error)
	Tree    func(ctx context.Context, repo string, project source.Project) (source.WritableTree, error)
	// Lock is how the command waits for the tree's journal lock, saying so on w.
	Lock func(w io.Writer) journal.Options

	Repo string
	JSON bool
}

func (o *statusOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
}

func newStatusCmd(f *Factory) *cobra.Command {
	o := &statusOptions{Catalog: f.Catalog, Tree: f.Tree, Lock: f.lockOptions}
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the patches applied to a tree and whether their files changed since",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.IO = streams(c)
			return runStatus(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runStatus(ctx context.Context, o *statusOptions) error {
	w, errw := o.IO.Out, o.IO.ErrOut
	cat, err := o.Catalog()
	if err != nil {
		fmt.Fprintf(errw, "smpatch: warning: %v\n", err)
		cat = nil
	}
	t, err := o.Tree(ctx, o.Repo, "")
	if err != nil {
		return err
	}
	res, err := patches.Status(ctx, t, cat, o.Lock(errw))
	if err != nil {
		return err
	}
	if o.JSON {
		return WriteJSON(w, res)
	}
	fmt.Fprintf(w, "tree: %s\n", patches.TreeLine(ctx, t))
	for _, in := range res.Interrupted {
		fmt.Fprintln(w, in)
	}
	if len(res.Patches) == 0 {
		fmt.Fprintln(w, "no patches applied")
		return nil
	}
	for _, ps := range res.Patches {
		state := "clean"
		if !ps.Clean {
			state = "changed since apply"
		}
		if ps.Unfinished {
			state = "left to finish by hand (apply --merge or --reject)"
		}
		if ps.Damaged != "" {
			state = "journal damaged: " + ps.Damaged
		}
		fmt.Fprintf(w, "%s: applied %s, variant %s, %s\n", ps.Name, ps.AppliedAt.Format("2006-01-02 15:04:05Z07:00"), ps.Variant, state)
		if ps.CatalogChanged {
			fmt.Fprintln(w, "  the catalog's patch differs from the one applied")
		}
		for _, n := range ps.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
		for _, f := range ps.Files {
			if len(f.Under) > 0 {
				fmt.Fprintf(w, "  %s: %s (under %s)\n", source.ShownPath(t, f.Path), f.State, strings.Join(f.Under, ", "))
				continue
			}
			fmt.Fprintf(w, "  %s: %s\n", source.ShownPath(t, f.Path), f.State)
		}
	}
	return nil
}

package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/author"
	"github.com/smpatch/smpatch/source"
)

// smpatch refresh NAME --repo TREE: a user patch's shape on a newer tree
// becomes a new variant.

// refreshOptions are smpatch refresh's flags, streams and dependencies.
type refreshOptions struct {
	IO      IOStreams
	Catalog func() (*patches.Catalog, error)
	Tree    func(ctx context.Context, repo string, project source.Project) (source.WritableTree, error)

	Name     string
	Repo     string
	Versions string
	Replace  bool
	JSON     bool
}

func (o *refreshOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the newer tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	f.StringVar(&o.Versions, "versions", "", "the new variant's range (default: from the tree's version on, the older variant cut there)")
	f.BoolVar(&o.Replace, "replace", false, "replace the diffs of the variant whose range holds the tree's version (its range kept) instead of adding a variant")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
	c.MarkFlagsMutuallyExclusive("versions", "replace")
}

func newRefreshCmd(f *Factory) *cobra.Command {
	o := &refreshOptions{Catalog: f.Catalog, Tree: f.Tree}
	c := &cobra.Command{
		Use:   "refresh NAME",
		Short: "Write the shape a patch of yours has on a newer tree (offset, fuzz, moved, or finished by hand) as a new variant",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Name = streams(c), args[0]
			return runRefresh(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runRefresh(ctx context.Context, o *refreshOptions) error {
	cat, err := o.Catalog()
	if err != nil {
		return err
	}
	p, err := cat.Get(o.Name)
	if err != nil {
		return err
	}
	t, err := o.Tree(ctx, o.Repo, p.Project)
	if err != nil {
		return err
	}
	res, err := author.Refresh(ctx, t, p, author.RefreshOptions{ToolVersion: Version, Waiting: waitingLine(o.IO.ErrOut), Versions: o.Versions, Replace: o.Replace})
	if err != nil {
		return err
	}
	return printAuthored(o.IO, res, o.JSON, "refreshed")
}

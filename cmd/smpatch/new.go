package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches/author"
	"github.com/smpatch/smpatch/source"
)

// smpatch new NAME --repo TREE: a tree's own change becomes a catalog entry.

// newOptions are smpatch new's flags, streams and dependencies.
type newOptions struct {
	IO          IOStreams
	Tree        func(ctx context.Context, repo string, project source.Project) (source.WritableTree, error)
	CatalogDirs func() []string

	Name     string
	Repo     string
	Into     string
	Base     string
	Wheel    string
	Versions string
	Summary  string
	JSON     bool
}

func (o *newOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the edited tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	f.StringVar(&o.Into, "into", "", "the catalog directory to write NAME.toml and its diff in (default: the first --catalog, $SMPATCH_CATALOG or config file directory)")
	f.StringVar(&o.Base, "base", "", "for a checkout: the revision the edit is measured against (default HEAD)")
	f.StringVar(&o.Wheel, "wheel", "", "for site-packages: the wheel it was installed from (default: pip's cache, when it holds it)")
	f.StringVar(&o.Versions, "versions", "", "the variant's range, e.g. \">= 0.5.14, < 0.5.16\" (default: from the tree's version on)")
	f.StringVar(&o.Summary, "summary", "", "the entry's one-line summary")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
}

func newNewCmd(f *Factory) *cobra.Command {
	o := &newOptions{Tree: f.Tree, CatalogDirs: f.CatalogDirs}
	c := &cobra.Command{
		Use:   "new NAME",
		Short: "Make a tree's own edit a catalog entry (NAME.toml and its diff), recorded as applied",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Name = streams(c), args[0]
			return runNew(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

// intoDir is --into, else the first catalog directory.
func intoDir(into string, dirs func() []string) (string, error) {
	if into != "" {
		return into, nil
	}
	if ds := dirs(); len(ds) > 0 {
		return ds[0], nil
	}
	return "", withCode(exitUsage, errors.New("where should the entry go? give --into DIR (or --catalog DIR, $SMPATCH_CATALOG, or catalog in the config file)"))
}

func runNew(ctx context.Context, o *newOptions) error {
	into, err := intoDir(o.Into, o.CatalogDirs)
	if err != nil {
		return err
	}
	t, err := o.Tree(ctx, o.Repo, "")
	if err != nil {
		return err
	}
	res, err := author.New(ctx, t, author.NewOptions{Name: o.Name, Into: into, Base: o.Base, Wheel: o.Wheel, Versions: o.Versions, Summary: o.Summary,
		ToolVersion: Version, Waiting: waitingLine(o.IO.ErrOut)})
	if err != nil {
		return err
	}
	return printAuthored(o.IO, res, o.JSON, "made")
}

// printAuthored prints what new, import or refresh wrote.
func printAuthored(io IOStreams, res *author.Result, asJSON bool, verb string) error {
	if asJSON {
		return WriteJSON(io.Out, res)
	}
	w := io.Out
	if res.Note != "" {
		fmt.Fprintf(w, "%s: %s\n", res.Name, res.Note)
		return nil
	}
	rng := res.Versions
	if rng == "" {
		rng = "any version"
	}
	fmt.Fprintf(w, "%s: %s %s, variant %s (%s)\n", res.Name, verb, res.TOML, res.Variant, rng)
	for _, d := range res.Diffs {
		fmt.Fprintf(w, "  diff: %s\n", d)
	}
	if res.VersionNote != "" {
		fmt.Fprintf(w, "  %s\n", res.VersionNote)
	}
	if res.Replaced {
		fmt.Fprintf(w, "  variant %s's diffs replaced, its range kept\n", res.Variant)
	}
	if res.Pristine != "" {
		fmt.Fprintf(w, "  against: %s\n", res.Pristine)
	}
	for _, f := range res.Files {
		fmt.Fprintf(w, "  file: %s\n", f)
	}
	if res.Narrowed != "" {
		fmt.Fprintf(w, "  %s\n", res.Narrowed)
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(w, "  left out: %s\n", s)
	}
	if res.Recorded {
		fmt.Fprintf(w, "  the tree has %s applied (smpatch status; smpatch revert %s restores the pristine bytes)\n", res.Name, res.Name)
	}
	return nil
}

package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches/author"
)

// smpatch import NAME (--git CLONE --commit REV | --file X.patch | --url URL).

// importOptions are smpatch import's flags, streams and dependencies.
type importOptions struct {
	IO          IOStreams
	CatalogDirs func() []string

	Name     string
	Into     string
	Git      string
	Commit   string
	File     string
	URL      string
	Summary  string
	Versions string
	JSON     bool
}

func (o *importOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Into, "into", "", "the catalog directory to write NAME.toml and its diff in (default: the first --catalog, $SMPATCH_CATALOG or config file directory)")
	f.StringVar(&o.Git, "git", "", "a local clone to read the commit from")
	f.StringVar(&o.Commit, "commit", "", "with --git: the commit (against its parent), or FROM..TO")
	f.StringVar(&o.File, "file", "", "a git format-patch file or a plain unified diff")
	f.StringVar(&o.URL, "url", "", "a pull request, commit or .patch URL, fetched once; its sha256 goes into the entry")
	f.StringVar(&o.Summary, "summary", "", "the entry's one-line summary (default: the commit's subject)")
	f.StringVar(&o.Versions, "versions", "", "the variant's range, e.g. \">= 0.5.14\" (default: from the parent commit's version on, when it is known)")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
	c.MarkFlagsMutuallyExclusive("git", "file", "url")
	c.MarkFlagsOneRequired("git", "file", "url")
	c.MarkFlagsRequiredTogether("git", "commit")
}

func newImportCmd(f *Factory) *cobra.Command {
	o := &importOptions{CatalogDirs: f.CatalogDirs}
	c := &cobra.Command{
		Use:   "import NAME (--git CLONE --commit REV[..REV] | --file X.patch | --url URL)",
		Short: "Make an upstream commit, a .patch file or a pull request a catalog entry",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Name = streams(c), args[0]
			return runImport(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runImport(ctx context.Context, o *importOptions) error {
	into, err := intoDir(o.Into, o.CatalogDirs)
	if err != nil {
		return err
	}
	res, err := author.Import(ctx, author.ImportOptions{Name: o.Name, Into: into, Git: o.Git, Commit: o.Commit, File: o.File, URL: o.URL, Summary: o.Summary, Versions: o.Versions})
	if err != nil {
		return err
	}
	return printAuthored(o.IO, res, o.JSON, "imported into")
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches"
)

// smpatch status: the patches applied to a tree.

func newStatusCmd(g *globalOptions) *cobra.Command {
	var (
		repo   string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the patches applied to a tree and whether their files changed since",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			lightGC()
			ctx := c.Context()
			w := c.OutOrStdout()
			cat, err := g.loadCatalog()
			if err != nil {
				fmt.Fprintf(c.ErrOrStderr(), "smpatch: warning: %v\n", err)
				cat = nil
			}
			t, err := resolveTree(ctx, g, repo, "")
			if err != nil {
				return err
			}
			res, err := patches.Status(ctx, t, cat)
			if err != nil {
				return err
			}
			for _, r := range res.Recovered {
				fmt.Fprintf(c.ErrOrStderr(), "smpatch: %s\n", r)
			}
			if asJSON {
				return writeJSON(w, res)
			}
			fmt.Fprintf(w, "tree: %s\n", patches.TreeLine(ctx, t))
			if len(res.Patches) == 0 {
				fmt.Fprintln(w, "no patches applied")
				return nil
			}
			for _, ps := range res.Patches {
				state := "clean"
				if !ps.Clean {
					state = "changed since apply"
				}
				fmt.Fprintf(w, "%s: applied %s, variant %s, %s\n", ps.Name, ps.AppliedAt.Format("2006-01-02 15:04:05Z07:00"), ps.Variant, state)
				if ps.CatalogChanged {
					fmt.Fprintln(w, "  the catalog's patch differs from the one applied")
				}
				for _, n := range ps.Notes {
					fmt.Fprintf(w, "  note: %s\n", n)
				}
				for _, f := range ps.Files {
					fmt.Fprintf(w, "  %s: %s\n", f.Path, f.State)
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&repo, "repo", "", "the tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

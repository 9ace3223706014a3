package main

// Command file: journal (trust, forget).

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches"
)

func newJournalCmd(g *globalOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "journal",
		Short: "Adopt a journal smpatch did not write here, or drop an entry (docs/security.md)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newJournalTrustCmd(g), newJournalForgetCmd(g))
	return c
}

func newJournalTrustCmd(g *globalOptions) *cobra.Command {
	var (
		repo   string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "trust",
		Short: "Adopt the tree's journal as this user's (after reading it): checks it and signs it",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			w := c.OutOrStdout()
			t, err := resolveTree(ctx, g, repo, "")
			if err != nil {
				return err
			}
			res, err := patches.TrustJournal(ctx, t)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(w, res)
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
		},
	}
	c.Flags().StringVar(&repo, "repo", "", "the tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newJournalForgetCmd(g *globalOptions) *cobra.Command {
	var repo string
	c := &cobra.Command{
		Use:   "forget NAME",
		Short: "Drop a journal entry and its copies, keeping every tree file as it is now",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			t, err := resolveTree(ctx, g, repo, "")
			if err != nil {
				return err
			}
			e, err := patches.ForgetEntry(ctx, t, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "%s: entry dropped (%s, %d files left as they are)\n", e.Name, e.State, len(e.Files))
			return nil
		},
	}
	c.Flags().StringVar(&repo, "repo", "", "the tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	return c
}

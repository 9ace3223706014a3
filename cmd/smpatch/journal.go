package main

// Command file: journal, the parent of trust and forget.

import (
	"github.com/spf13/cobra"
)

func newJournalCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "journal",
		Short: "Adopt a journal smpatch did not write for this user, or drop an entry (docs/security.md)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newJournalTrustCmd(f), newJournalForgetCmd(f))
	return c
}

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches"
)

// applyArgs is apply's argument check: with no name, the usage error
// lists the patches there are to name (the built-in catalog and
// --catalog's), instead of the bare usage line.
func applyArgs(catalog func() (*patches.Catalog, error)) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return nil
		}
		msg := "missing argument: usage: " + c.CommandPath() + " NAME..."
		if cat, err := catalog(); err == nil {
			var names []string
			for _, p := range cat.All() {
				names = append(names, p.Name)
			}
			if len(names) > 0 {
				msg = "name the patches to apply: " + strings.Join(names, ", ") + " ('smpatch list' says what each does)"
			}
		}
		return withCode(exitUsage, fmt.Errorf("apply: %s (run '%s --help')", msg, c.CommandPath()))
	}
}

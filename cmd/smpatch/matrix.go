package main

import "github.com/spf13/cobra"

// matrixSubcommands holds the subcommands of "smpatch matrix"; expand and
// render, build and run live in the command files of their own packages.
var matrixSubcommands []func(*globalOptions) *cobra.Command

func registerMatrixCommand(f func(*globalOptions) *cobra.Command) {
	matrixSubcommands = append(matrixSubcommands, f)
}

func init() {
	registerCommand(func(g *globalOptions) *cobra.Command {
		c := &cobra.Command{
			Use:   "matrix",
			Short: "Expand, render, build and run a TOML matrix of environment variants",
			Args:  cobra.NoArgs,
			RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
		}
		for _, f := range matrixSubcommands {
			c.AddCommand(f(g))
		}
		return c
	})
}

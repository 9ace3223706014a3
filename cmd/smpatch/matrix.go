package main

import (
	"github.com/spf13/cobra"
)

// smpatch matrix: the parent of expand, render, build and run.

func newMatrixCmd(f *Factory) *cobra.Command {
	g := f.Globals
	c := &cobra.Command{
		Use:   "matrix",
		Short: "Expand, render, build and run a TOML matrix of environment variants",
		Args:  GroupArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(
		newMatrixExpandCmd(g),
		newMatrixRenderCmd(g),
		newMatrixBuildCmd(f),
		newMatrixRunCmd(g),
		newMatrixCompareCmd(g),
	)
	return c
}

package main

import (
	"github.com/spf13/cobra"
)

// smpatch matrix: the parent of expand, render, build and run.

func newMatrixCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "matrix",
		Short: "Expand, render, build and run a TOML matrix of environment variants",
		Args:  GroupArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(
		newMatrixExpandCmd(f),
		newMatrixRenderCmd(f),
		newMatrixBuildCmd(f),
		newMatrixRunCmd(f),
		newMatrixCompareCmd(f),
	)
	return c
}

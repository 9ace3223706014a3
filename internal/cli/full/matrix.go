package full

import (
	"github.com/smpatch/smpatch/internal/cli"
	"github.com/spf13/cobra"
)

// smpatch matrix: the parent of expand, render, build and run.

func newMatrixCmd(g *cli.Globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "matrix",
		Short: cli.Short("matrix"),
		Args:  cli.GroupArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(
		newMatrixExpandCmd(g),
		newMatrixRenderCmd(g),
		newMatrixBuildCmd(g),
		newMatrixRunCmd(g),
		newMatrixCompareCmd(g),
	)
	return c
}

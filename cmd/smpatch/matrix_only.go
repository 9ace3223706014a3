package main

import (
	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/matrix"
)

// --only ID for matrix expand and render, as for build and run.

func addOnlyFlag(c *cobra.Command, only *[]string, verb string) {
	c.Flags().StringArrayVar(only, "only", nil, verb+" only this cell (repeatable)")
}

// onlyExpansion is x with only the cells --only names, in the order
// given, and the step counts of those; x itself when none are named.
func onlyExpansion(x *matrix.Expansion, only []string) (*matrix.Expansion, error) {
	if len(only) == 0 {
		return x, nil
	}
	cells, err := selectCells(x, only)
	if err != nil {
		return nil, err
	}
	y := *x
	y.Cells = cells
	y.Steps.Runnable, y.Steps.Pruned, y.Steps.Warned = 0, 0, 0
	for _, c := range cells {
		switch {
		case c.Pruned != nil:
			y.Steps.Pruned++
		default:
			y.Steps.Runnable++
			if len(c.Warnings) > 0 {
				y.Steps.Warned++
			}
		}
	}
	if y.Cell(y.Baseline) == nil {
		y.Baseline = ""
	}
	return &y, nil
}

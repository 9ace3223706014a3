package main

// Command file: matrix compare.

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/launch"
)

// matrixCompareOptions are the flags of "smpatch matrix compare".
type matrixCompareOptions struct {
	Baseline string
	Pairs    []string
	JSON     bool
}

func (o *matrixCompareOptions) AddFlags(c *cobra.Command) {
	c.Flags().StringVar(&o.Baseline, "baseline", "", "compare every cell against this one (default: the run's baseline)")
	c.Flags().StringArrayVar(&o.Pairs, "pair", nil, "compare cell A against cell B, as A:B (repeatable)")
	c.Flags().BoolVar(&o.JSON, "json", false, "print JSON")
}

func newMatrixCompareCmd(g *Globals) *cobra.Command {
	o := &matrixCompareOptions{}
	c := &cobra.Command{
		Use:   "compare RESULTS",
		Short: "A/B verdicts from a run's results: each change with its interval, and whether it is more than noise",
		Long: "Read RESULTS (a results directory or its results.json) and compare cells on every metric:\n" +
			"--pair A:B compares A against B (repeatable); without pairs, every cell against --baseline\n" +
			"(default: the run's baseline). The change is the ratio of medians with a 95% percentile-\n" +
			"bootstrap interval; the verdict is the two-sided Mann-Whitney U test at p < 0.05.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runMatrixCompare(c.Context(), g, o, args, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	o.AddFlags(c)
	return c
}

func runMatrixCompare(ctx context.Context, g *Globals, o *matrixCompareOptions, args []string, w, errw io.Writer) error {
	s, err := launch.ReadSummary(args[0])
	if err != nil {
		return err
	}
	var pairs [][2]string
	for _, p := range o.Pairs {
		a, b, ok := strings.Cut(p, ":")
		if !ok || a == "" || b == "" {
			return exit.With(exit.Usage, fmt.Errorf("--pair %q: want A:B (cell ids)", p))
		}
		pairs = append(pairs, [2]string{a, b})
	}
	cs, err := s.ComparePairs(pairs, o.Baseline)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if o.JSON {
		return WriteJSON(w, map[string]any{"comparisons": cs})
	}
	launch.WriteComparisonsText(w, cs)
	return nil
}

package main

// smpatch matrix compare: A/B verdicts from a run's results.

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/launch"
)

// matrixCompareOptions are smpatch matrix compare's flags and streams.
type matrixCompareOptions struct {
	IO IOStreams

	Results  string // the results directory or its results.json
	Baseline string
	Pairs    []string
	JSON     bool
}

func (o *matrixCompareOptions) AddFlags(c *cobra.Command) {
	c.Flags().StringVar(&o.Baseline, "baseline", "", "compare every cell against this one (default: the run's baseline)")
	c.Flags().StringArrayVar(&o.Pairs, "pair", nil, "compare cell A against cell B, as A:B (repeatable)")
	c.Flags().BoolVar(&o.JSON, "json", false, "print JSON")
}

func newMatrixCompareCmd(*Factory) *cobra.Command {
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
			o.IO, o.Results = streams(c), args[0]
			return runMatrixCompare(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runMatrixCompare(ctx context.Context, o *matrixCompareOptions) error {
	s, err := launch.ReadSummary(o.Results)
	if err != nil {
		return err
	}
	var pairs [][2]string
	for _, p := range o.Pairs {
		a, b, ok := strings.Cut(p, ":")
		if !ok || a == "" || b == "" {
			return withCode(exitUsage, fmt.Errorf("--pair %q: want A:B (cell ids)", p))
		}
		pairs = append(pairs, [2]string{a, b})
	}
	cs, err := s.ComparePairs(pairs, o.Baseline)
	if err != nil {
		return fmt.Errorf("%s: %w", o.Results, err)
	}
	if o.JSON {
		return WriteJSON(o.IO.Out, map[string]any{"comparisons": cs})
	}
	launch.WriteComparisonsText(o.IO.Out, cs)
	return nil
}

package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/launch"
)

// smpatch triage: why a server died, from its logs.

// triageOptions are smpatch triage's flags and streams.
type triageOptions struct {
	IO IOStreams

	Logs       []string
	JSON       bool
	Ranks      bool     // --ranks: the logs are the ranks of one job
	Signatures []string // --signatures FILE, tried before the built-in ones
}

func (o *triageOptions) AddFlags(c *cobra.Command) {
	c.Flags().BoolVar(&o.JSON, "json", false, "print JSON")
	c.Flags().BoolVar(&o.Ranks, "ranks", false, "the logs are the ranks of one job: order their fatal lines by time and name the rank that failed first")
	c.Flags().StringArrayVar(&o.Signatures, "signatures", nil, "a TOML file of extra signatures, tried before the built-in ones (repeatable)")
}

func newTriageCmd(*Factory) *cobra.Command {
	o := &triageOptions{}
	c := &cobra.Command{
		Use:   "triage LOG...",
		Short: "Name why an sglang server died: the first fatal known line of each log, its meaning and what to try",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Logs = streams(c), args
			return runTriage(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runTriage(ctx context.Context, o *triageOptions) error {
	sigs, err := launch.LoadSignatures(o.Signatures)
	if err != nil {
		return err
	}
	var verdicts []*launch.Verdict
	for _, a := range o.Logs {
		v, err := sigs.TriageFileContext(ctx, a)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, v)
	}
	if o.Ranks {
		verdicts = []*launch.Verdict{launch.MergeRanks(verdicts)}
	}
	if o.JSON {
		return WriteJSON(o.IO.Out, map[string]any{"logs": verdicts})
	}
	for _, v := range verdicts {
		v.WriteText(o.IO.Out)
	}
	return nil
}

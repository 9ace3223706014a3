package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/launch"
)

// triageOptions are the flags of smpatch triage.
type triageOptions struct {
	JSON       bool
	Ranks      bool     // --ranks: the logs are the ranks of one job
	Signatures []string // --signatures FILE, tried before the built-in ones
}

func (o *triageOptions) AddFlags(c *cobra.Command) {
	c.Flags().BoolVar(&o.JSON, "json", false, "print JSON")
	c.Flags().BoolVar(&o.Ranks, "ranks", false, "the logs are the ranks of one job: order their fatal lines by time and name the rank that failed first")
	c.Flags().StringArrayVar(&o.Signatures, "signatures", nil, "a TOML file of extra signatures, tried before the built-in ones (repeatable)")
}

func newTriageCmd(f *Factory) *cobra.Command {
	g := f.Globals
	o := &triageOptions{}
	c := &cobra.Command{
		Use:   "triage LOG...",
		Short: "Name why an sglang server died: the first fatal known line of each log, its meaning and what to try",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runTriage(c.Context(), g, o, args, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	o.AddFlags(c)
	return c
}

func runTriage(ctx context.Context, g *Globals, o *triageOptions, args []string, w, errw io.Writer) error {
	sigs, err := launch.LoadSignatures(o.Signatures)
	if err != nil {
		return err
	}
	var verdicts []*launch.Verdict
	for _, a := range args {
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
		return WriteJSON(w, map[string]any{"logs": verdicts})
	}
	for _, v := range verdicts {
		v.WriteText(w)
	}
	return nil
}

package main

import (
	"encoding/json"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/launch"
)

type triageOptions struct {
	JSON       bool
	Ranks      bool
	Signatures []string
}

func init() { registerCommand(newTriageCmd) }

func newTriageCmd(g *globalOptions) *cobra.Command {
	o := &triageOptions{}
	c := &cobra.Command{
		Use:   "triage LOG...",
		Short: "Name why an sglang server died: the first fatal known line of each log, its meaning and what to try",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			sigs, err := launch.LoadSignatures(o.Signatures)
			if err != nil {
				return err
			}
			var verdicts []*launch.Verdict
			for _, a := range args {
				v, err := sigs.TriageFile(a)
				if err != nil {
					return err
				}
				verdicts = append(verdicts, v)
			}
			if o.Ranks {
				verdicts = []*launch.Verdict{launch.MergeRanks(verdicts)}
			}
			if o.JSON {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"logs": verdicts})
			}
			for _, v := range verdicts {
				v.WriteText(c.OutOrStdout())
			}
			return nil
		},
	}
	c.Flags().BoolVar(&o.JSON, "json", false, "print JSON")
	c.Flags().BoolVar(&o.Ranks, "ranks", false, "the logs are the ranks of one job: order their fatal lines by time and name the rank that failed first")
	c.Flags().StringArrayVar(&o.Signatures, "signatures", nil, "a TOML file of extra signatures, tried before the built-in ones (repeatable)")
	return c
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/matrix"
)

func init() {
	registerMatrixCommand(func(g *globalOptions) *cobra.Command {
		var o matrixOptions
		var out, refs string
		var asJSON bool
		c := &cobra.Command{
			Use:   "render FILE --out DIR",
			Short: "Write launch specs for every cell: run.sh, env, sitecustomize.py, a Kubernetes Job",
			Long: "Render a matrix into DIR: per runnable cell DIR/<cell-id>/ with run.sh, env,\n" +
				"sitecustomize.py and job.yaml (batch/v1); for the whole matrix index.json,\n" +
				"SUMMARY.md, github-matrix.json and slurm.sbatch. --refs pins images by digest\n" +
				"(a JSON object of cell id to repo@sha256:..., as matrix build writes it).",
			Args: cobra.ExactArgs(1),
			RunE: func(c *cobra.Command, args []string) error {
				if out == "" {
					return exit.With(exit.Usage, errors.New("matrix render: --out DIR is required"))
				}
				ropts := matrix.RenderOptions{}
				if refs != "" {
					r, err := matrix.ReadRefs(refs)
					if err != nil {
						return err
					}
					ropts.Refs = r
				}
				x, err := expandMatrix(c.Context(), g, args[0], &o)
				if err != nil {
					return err
				}
				for id := range ropts.Refs {
					if x.Cell(id) == nil && x.Shard.Count <= 1 {
						return fmt.Errorf("%s: no cell %q in %s", refs, id, args[0])
					}
				}
				files, err := matrix.Render(x, ropts)
				if err != nil {
					return err
				}
				if err := matrix.WriteRender(out, files); err != nil {
					return err
				}
				w := c.OutOrStdout()
				if asJSON {
					var cells []string
					for _, cell := range x.Runnable() {
						cells = append(cells, cell.ID)
					}
					enc := json.NewEncoder(w)
					enc.SetIndent("", "  ")
					return enc.Encode(map[string]any{"out": out, "files": len(files), "cells": cells, "pruned": x.Steps.Pruned})
				}
				fmt.Fprintf(w, "%s: %d cells rendered into %s (%d pruned; see %s/SUMMARY.md)\n", args[0], len(x.Runnable()), out, len(x.Cells)-len(x.Runnable()), out)
				return nil
			},
		}
		o.AddFlags(c)
		c.Flags().StringVar(&out, "out", "", "directory to write (replaced when it holds an earlier render)")
		c.Flags().StringVar(&refs, "refs", "", "JSON file of cell id -> image reference pinned by digest (from matrix build)")
		c.Flags().BoolVar(&asJSON, "json", false, "print what was written as JSON")
		return c
	})
}

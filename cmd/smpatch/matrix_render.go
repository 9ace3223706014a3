package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/matrix"
)

// matrixRenderOptions are the flags of smpatch matrix render.
type matrixRenderOptions struct {
	matrixOptions
	Out  string // --out DIR
	Refs string // --refs FILE
	JSON bool
	Only []string // --only ID
}

func (o *matrixRenderOptions) AddFlags(c *cobra.Command) {
	o.matrixOptions.AddFlags(c)
	c.Flags().StringVar(&o.Out, "out", "", "directory to write (replaced when it holds an earlier render)")
	c.Flags().StringVar(&o.Refs, "refs", "", "JSON file of cell id -> image reference pinned by digest (from matrix build)")
	c.Flags().BoolVar(&o.JSON, "json", false, "print what was written as JSON")
	addOnlyFlag(c, &o.Only, "render")
}

func newMatrixRenderCmd(g *Globals) *cobra.Command {
	o := &matrixRenderOptions{}
	c := &cobra.Command{
		Use:   "render FILE --out DIR",
		Short: "Write launch specs for every cell: run.sh, env, sitecustomize.py, a Kubernetes Job",
		Long: "Render a matrix into DIR: per runnable cell DIR/<cell-id>/ with run.sh, env,\n" +
			"sitecustomize.py and job.yaml (batch/v1); for the whole matrix index.json,\n" +
			"SUMMARY.md, github-matrix.json and slurm.sbatch. --refs pins images by digest\n" +
			"(a JSON object of cell id to repo@sha256:..., as matrix build writes it).",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runMatrixRender(c.Context(), g, o, args, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	o.AddFlags(c)
	return c
}

func runMatrixRender(ctx context.Context, g *Globals, o *matrixRenderOptions, args []string, w, errw io.Writer) error {
	if o.Out == "" {
		return exit.With(exit.Usage, errors.New("matrix render: --out DIR is required"))
	}
	ropts := matrix.RenderOptions{}
	if o.Refs != "" {
		r, err := matrix.ReadRefs(o.Refs)
		if err != nil {
			return err
		}
		ropts.Refs = r
	}
	x, err := expandMatrix(ctx, g, args[0], &o.matrixOptions)
	if err != nil {
		return err
	}
	for id := range ropts.Refs {
		if x.Cell(id) == nil && x.Shard.Count <= 1 {
			return fmt.Errorf("%s: no cell %q in %s", o.Refs, id, args[0])
		}
	}
	if x, err = onlyExpansion(x, o.Only); err != nil {
		return err
	}
	files, err := matrix.Render(x, ropts)
	if err != nil {
		return err
	}
	if err := matrix.WriteRender(o.Out, files); err != nil {
		return err
	}
	if o.JSON {
		var cells []string
		for _, cell := range x.Runnable() {
			cells = append(cells, cell.ID)
		}
		return WriteJSON(w, map[string]any{"out": o.Out, "files": len(files), "cells": cells, "pruned": x.Steps.Pruned})
	}
	fmt.Fprintf(w, "%s: %d cells rendered into %s (%d pruned; see %s/SUMMARY.md)\n", args[0], len(x.Runnable()), o.Out, len(x.Cells)-len(x.Runnable()), o.Out)
	return nil
}

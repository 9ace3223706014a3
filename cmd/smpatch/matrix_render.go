package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/launch"
	"github.com/smpatch/smpatch/matrix"
)

// matrixRenderOptions are smpatch matrix render's flags, streams and
// dependencies.
type matrixRenderOptions struct {
	IO IOStreams
	matrixOptions

	File string
	Out  string // --out DIR
	Refs string // --refs FILE
	JSON bool
	Only []string // --only ID
}

func (o *matrixRenderOptions) AddFlags(c *cobra.Command) {
	o.matrixOptions.AddFlags(c)
	c.Flags().StringVar(&o.Out, "out", "", "directory to write: new, empty or an earlier render (whose files are replaced; nothing else in it is touched)")
	c.Flags().StringVar(&o.Refs, "refs", "", "JSON file of cell id -> image reference pinned by digest (from matrix build)")
	c.Flags().BoolVar(&o.JSON, "json", false, "print what was written as JSON")
	addOnlyFlag(c, &o.Only, "render")
}

func newMatrixRenderCmd(f *Factory) *cobra.Command {
	o := &matrixRenderOptions{matrixOptions: newMatrixOptions(f)}
	c := &cobra.Command{
		Use:   "render FILE --out DIR",
		Short: "Write launch specs for every cell: run.sh, env, sitecustomize.py, a Kubernetes Job",
		Long: "Render a matrix into DIR: per runnable cell DIR/<cell-id>/ with run.sh, env,\n" +
			"sitecustomize.py and job.yaml (batch/v1); for the whole matrix index.json,\n" +
			"SUMMARY.md, github-matrix.json and slurm.sbatch. --refs pins images by digest\n" +
			"(a JSON object of cell id to repo@sha256:..., as matrix build writes it).",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.File = streams(c), args[0]
			return runMatrixRender(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runMatrixRender(ctx context.Context, o *matrixRenderOptions) error {
	if o.Out == "" {
		return withCode(exitUsage, errors.New("matrix render: --out DIR is required"))
	}
	ropts := matrix.RenderOptions{Job: launch.JobYAML}
	if o.Refs != "" {
		r, err := matrix.ReadRefs(o.Refs)
		if err != nil {
			return err
		}
		ropts.Refs = r
	}
	x, err := o.expand(ctx, o.File)
	if err != nil {
		return err
	}
	for id := range ropts.Refs {
		if x.Cell(id) == nil && x.Shard.Count <= 1 {
			return fmt.Errorf("%s: no cell %q in %s", o.Refs, id, o.File)
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
		return WriteJSON(o.IO.Out, map[string]any{"out": o.Out, "files": len(files), "cells": cells, "pruned": x.Steps.Pruned})
	}
	fmt.Fprintf(o.IO.Out, "%s: %s rendered into %s (%d pruned; see %s/SUMMARY.md)\n", o.File, nCells(len(x.Runnable())), o.Out, len(x.Cells)-len(x.Runnable()), o.Out)
	return nil
}

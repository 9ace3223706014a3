package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/image"
	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/matrix"
)

// smpatch matrix build FILE: one image per cell.

// matrixBuildOptions are the flags of smpatch matrix build.
type matrixBuildOptions struct {
	matrixOptions
	Out    string
	Push   string
	Only   []string
	Refs   string
	Base   string // --base REF: instead of the matrix's [base] image
	Strict bool
	JSON   bool
}

func (o *matrixBuildOptions) AddFlags(c *cobra.Command) {
	o.matrixOptions.AddFlags(c)
	c.Flags().StringVar(&o.Out, "out", "", "write every cell's image into this OCI layout directory, or docker-archive:FILE[:REPO] (one docker-save tarball, images tagged REPO:ID)")
	c.Flags().StringVar(&o.Push, "push", "", "push every cell's image to this repository, tagged with the cell id")
	c.Flags().StringArrayVar(&o.Only, "only", nil, "build only this cell (repeatable)")
	c.Flags().StringVar(&o.Refs, "refs", "", "refs file to write, cell id -> repo@sha256:... (default DIR/refs.json with --out, results/NAME/refs.json with --push, beside matrix run's results)")
	c.Flags().StringVar(&o.Base, "base", "", "build on this image instead of the matrix's [base] image (a mirror, oci:DIR, a docker-save FILE.tar)")
	c.Flags().BoolVar(&o.Strict, "strict", false, "fuzzy matches count as failures")
	c.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
}

// matrixBuildResult is smpatch matrix build --json.
type matrixBuildResult struct {
	Base       string              `json:"base"`
	BaseDigest string              `json:"base_digest"`
	Dest       string              `json:"destination"`
	Refs       string              `json:"refs"`
	Cells      []image.CellOutcome `json:"cells"`
}

func newMatrixBuildCmd(g *Globals) *cobra.Command {
	o := &matrixBuildOptions{}
	c := &cobra.Command{
		Use:   "build FILE (--out DIR | --push REPO)",
		Short: "Build one image per cell: the matrix's base image plus the cell's patch layer and env",
		Long: "Build one image per runnable cell on the matrix's [base] image, into an OCI layout\n" +
			"(--out; each image annotated with its cell id) or a registry (--push; tagged with\n" +
			"the cell id), and write the refs file that `matrix render --refs` pins. Pruned cells\n" +
			"are listed, not built; a cell whose image is already there is skipped. A failing\n" +
			"cell does not stop the others; the exit code is 4 when a cell's patch conflicts,\n" +
			"1 for other failures.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runMatrixBuild(c.Context(), g, o, args, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	o.AddFlags(c)
	return c
}

func runMatrixBuild(ctx context.Context, g *Globals, o *matrixBuildOptions, args []string, w, errw io.Writer) error {
	if (o.Out == "") == (o.Push == "") {
		return exit.With(exit.Usage, errors.New("matrix build: give one of --out DIR or --push REPO"))
	}
	x, err := expandMatrix(ctx, g, args[0], &o.matrixOptions)
	if err != nil {
		return err
	}
	cells, err := selectCells(x, o.Only)
	if err != nil {
		return err
	}
	baseRef := o.Base
	if baseRef == "" {
		if x.Matrix.Base.Image == "" {
			return fmt.Errorf("%s: [base] image is not set; matrix build needs a base image (or --base REF)", args[0])
		}
		baseRef = matrixBaseRef(x.Matrix.Base.Image, filepath.Dir(args[0]))
	}
	cat, err := g.LoadCatalog()
	if err != nil {
		return err
	}
	var dst image.Destination
	refs := o.Refs
	if strings.HasPrefix(o.Out, image.ArchivePrefix) {
		d, tag, err := image.ParseDestination(o.Out, image.Remote{})
		if err != nil || tag != "" {
			return exit.With(exit.Usage, fmt.Errorf("--out %s: want docker-archive:FILE[:REPO]; each cell's image is tagged REPO:ID (%v)", o.Out, err))
		}
		dst = d
		if refs == "" {
			refs = filepath.Join(filepath.Dir(d.(*image.Archive).Path), "refs.json")
		}
	} else if o.Out != "" {
		dst = &image.Layout{Dir: o.Out}
		if refs == "" {
			refs = filepath.Join(o.Out, "refs.json")
		}
	} else {
		d, tag, err := image.ParseDestination(o.Push, image.Remote{})
		if err != nil {
			return exit.With(exit.Usage, fmt.Errorf("--push: %w", err))
		}
		if tag != "" {
			return exit.With(exit.Usage, fmt.Errorf("--push %s: name a repository; each cell's image is tagged with its id", o.Push))
		}
		dst = d
		if refs == "" {
			// Beside matrix run's results for the same matrix, not
			// silently in the current directory.
			refs = filepath.Join(g.ResultsDir(), x.Matrix.Slug(), "refs.json")
			if err := os.MkdirAll(filepath.Dir(refs), 0o755); err != nil {
				return err
			}
		}
	}
	base, err := image.OpenBase(ctx, baseRef, image.Remote{}, imageFSOptions())
	if err != nil {
		return err
	}
	if l, ok := dst.(*image.Layout); ok && base.Ref.Kind == "layout" {
		l.LinkFrom = base.Ref.Dir
	}
	labels := map[string]string{}
	if x.Matrix.Name != "" {
		labels["io.smpatch.matrix"] = x.Matrix.Name
	}
	mb := &image.MatrixBuild{
		Base: base, Dest: dst, Labels: labels,
		Resolve: cat.Get,
		Options: image.BuildOptions{Strict: o.Strict, CatalogDigest: cat.Digest(), Tool: Version},
	}
	if errw := errw; IsTerminal(errw) {
		done := 0
		mb.Progress = func(o image.CellOutcome) {
			done++
			fmt.Fprintf(errw, "[%d/%d] %s %s\n", done, len(cells), o.Status, o.ID)
		}
	}
	outs := mb.Run(ctx, cells)
	inMatrix := func(id string) bool { return x.Cell(id) != nil || x.Shard.Count > 1 }
	if _, err := image.WriteRefs(refs, outs, inMatrix); err != nil {
		return err
	}
	fmt.Fprintf(g.Info(errw), "smpatch: refs written to %s (matrix render --refs / matrix run --refs)\n", refs)
	if o.JSON {
		if err := WriteJSON(w, matrixBuildResult{Base: baseRef, BaseDigest: base.Digest.String(), Dest: dst.String(), Refs: refs, Cells: outs}); err != nil {
			return err
		}
	} else {
		printMatrixBuild(w, outs, refs)
	}
	return image.ExitError(outs)
}

// matrixBaseRef resolves a relative oci:DIR against the matrix file's
// directory, as other paths in a matrix file are.
func matrixBaseRef(ref, dir string) string {
	if rest, ok := strings.CutPrefix(ref, "oci:"); ok && !filepath.IsAbs(rest) {
		return "oci:" + filepath.Join(dir, rest)
	}
	return ref
}

// selectCells keeps the cells --only names (all when none), pruned ones
// included so they are listed.
func selectCells(x *matrix.Expansion, only []string) ([]*matrix.Cell, error) {
	if len(only) == 0 {
		return x.Cells, nil
	}
	var out []*matrix.Cell
	for _, id := range only {
		c := x.Cell(id)
		if c == nil {
			var ids []string
			for _, c := range x.Cells {
				ids = append(ids, c.ID)
			}
			sort.Strings(ids)
			return nil, fmt.Errorf("--only %s: no such cell (cells: %s)", id, strings.Join(ids, ", "))
		}
		out = append(out, c)
	}
	return out, nil
}

func printMatrixBuild(w io.Writer, outs []image.CellOutcome, refs string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	n := map[string]int{}
	for _, o := range outs {
		n[o.Status]++
		detail := o.Ref
		if o.Status == image.StatusFailed || o.Status == image.StatusPruned {
			detail = o.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", o.Status, o.ID, detail)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d built, %d skipped, %d failed, %d pruned; refs in %s\n",
		n[image.StatusBuilt], n[image.StatusSkipped], n[image.StatusFailed], n[image.StatusPruned], refs)
}

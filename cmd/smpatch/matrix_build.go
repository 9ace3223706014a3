package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/google/renameio/v2"
	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/image"
	"github.com/smpatch/smpatch/matrix"
	"github.com/smpatch/smpatch/patches"
)

// smpatch matrix build FILE: one image per cell.

// matrixBuildOptions are smpatch matrix build's flags, argument, streams
// and dependencies.
type matrixBuildOptions struct {
	IO         IOStreams
	Catalog    func() (*patches.Catalog, error)
	Registry   func(registryFlags) (image.Remote, error)
	Expand     func(ctx context.Context, file string, o *matrixOptions) (*matrix.Expansion, error)
	ResultsDir func() string
	Info       func(io.Writer) io.Writer

	matrixOptions
	registryFlags
	File   string // the argument
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
	o.registryFlags.AddFlags(c)
}

// Cell statuses of a matrix build beyond the image's: a pruned cell is
// listed, not built.
const statusPruned = "pruned"

// cellOutcome is what happened to one cell of a matrix build. Its JSON
// keys are stable.
type cellOutcome struct {
	ID       string   `json:"id"`
	Status   string   `json:"status"` // built, skipped, failed, pruned
	Patches  []string `json:"patches"`
	Ref      string   `json:"ref,omitempty"`
	Digest   string   `json:"digest,omitempty"`
	PatchSet string   `json:"patch_set,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Code     int      `json:"exit_code,omitempty"` // for a failed cell: 4 conflict, 1 other
}

// matrixBuildResult is smpatch matrix build --json.
type matrixBuildResult struct {
	Base            string        `json:"base"`
	BaseDigest      string        `json:"base_digest"`
	Platform        string        `json:"platform"`
	PlatformDefault bool          `json:"platform_default"`
	Dest            string        `json:"destination"`
	Refs            string        `json:"refs"`
	Cells           []cellOutcome `json:"cells"`
}

func newMatrixBuildCmd(f *Factory) *cobra.Command {
	g := f.Globals
	o := &matrixBuildOptions{
		Catalog: f.Catalog, Registry: f.Registry, ResultsDir: g.ResultsDir, Info: f.Info,
		Expand: func(ctx context.Context, file string, mo *matrixOptions) (*matrix.Expansion, error) {
			return expandMatrix(ctx, g, file, mo)
		},
	}
	c := &cobra.Command{
		Use:   "build FILE (--out DIR | --push REPO)",
		Short: "Build one image per cell: the matrix's base image plus the cell's patch layer and env",
		Long: "Build one image per runnable cell on the matrix's [base] image, into an OCI layout\n" +
			"(--out; each image annotated with its cell id) or a registry (--push; tagged with\n" +
			"the cell id), and write the refs file that `matrix render --refs` pins. Pruned cells\n" +
			"are listed, not built; a cell whose image is already there is skipped. A failing\n" +
			"cell does not stop the others; the exit code is 4 when a cell's patch conflicts,\n" +
			"1 for other failures.\n\n" + platformHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.File = streams(c), args[0]
			return runMatrixBuild(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runMatrixBuild(ctx context.Context, o *matrixBuildOptions) error {
	if (o.Out == "") == (o.Push == "") {
		return withCode(exitUsage, errors.New("matrix build: give one of --out DIR or --push REPO"))
	}
	rem, err := o.Registry(o.registryFlags)
	if err != nil {
		return err
	}
	x, err := o.Expand(ctx, o.File, &o.matrixOptions)
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
			return fmt.Errorf("%s: [base] image is not set; matrix build needs a base image (or --base REF)", o.File)
		}
		baseRef = matrixBaseRef(x.Matrix.Base.Image, filepath.Dir(o.File))
	}
	cat, err := o.Catalog()
	if err != nil {
		return err
	}
	dst, refs, err := o.destination(x, rem)
	if err != nil {
		return err
	}
	errw := o.IO.ErrOut
	base, err := openBase(ctx, o.Info(errw), baseRef, rem)
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
	b := &image.Batch{
		Base: base, Dest: dst, Labels: labels, Resolve: cat.Get,
		Options: image.BuildOptions{Strict: o.Strict, CatalogDigest: cat.Digest(), Tool: Version},
	}
	var progress func(id, status string)
	if IsTerminal(errw) {
		done := 0
		progress = func(id, status string) {
			done++
			fmt.Fprintf(errw, "[%d/%d] %s %s\n", done, len(cells), status, id)
		}
		b.Progress = func(o image.Outcome) { progress(o.ID, o.Status) }
	}
	outs := buildCells(ctx, b, cells, progress)
	inMatrix := func(id string) bool { return x.Cell(id) != nil || x.Shard.Count > 1 }
	if err := writeRefs(refs, outs, inMatrix); err != nil {
		return err
	}
	fmt.Fprintf(o.Info(errw), "smpatch: refs written to %s (matrix render --refs / matrix run --refs)\n", refs)
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.JSON {
		err = WriteJSON(o.IO.Out, matrixBuildResult{
			Base: baseRef, BaseDigest: base.Digest.String(), Platform: base.Platform, PlatformDefault: base.PlatformDefault,
			Dest: dst.String(), Refs: refs, Cells: outs,
		})
		if err != nil {
			return err
		}
	} else {
		printMatrixBuild(o.IO.Out, outs, refs)
	}
	return cellsError(outs)
}

// destination is where --out or --push puts the images, and the refs file
// (--refs, else beside them).
func (o *matrixBuildOptions) destination(x *matrix.Expansion, rem image.Remote) (image.Destination, string, error) {
	refs := o.Refs
	switch {
	case strings.HasPrefix(o.Out, image.ArchivePrefix):
		d, tag, err := image.ParseDestination(o.Out, rem)
		if err != nil || tag != "" {
			return nil, "", withCode(exitUsage, fmt.Errorf("--out %s: want docker-archive:FILE[:REPO]; each cell's image is tagged REPO:ID (%v)", o.Out, err))
		}
		if refs == "" {
			refs = filepath.Join(filepath.Dir(d.(*image.Archive).Path), "refs.json")
		}
		return d, refs, nil
	case o.Out != "":
		if refs == "" {
			refs = filepath.Join(o.Out, "refs.json")
		}
		return &image.Layout{Dir: o.Out}, refs, nil
	}
	d, tag, err := image.ParseDestination(o.Push, rem)
	if err != nil {
		return nil, "", withCode(exitUsage, fmt.Errorf("--push: %w", err))
	}
	if tag != "" {
		return nil, "", withCode(exitUsage, fmt.Errorf("--push %s: name a repository; each cell's image is tagged with its id", o.Push))
	}
	if refs == "" {
		// Beside matrix run's results for the same matrix, not
		// silently in the current directory.
		refs = filepath.Join(o.ResultsDir(), x.Matrix.Slug(), "refs.json")
		if err := os.MkdirAll(filepath.Dir(refs), 0o755); err != nil {
			return nil, "", err
		}
	}
	return d, refs, nil
}

// buildCells builds the runnable cells as one batch and lists every cell,
// in order: pruned ones with the rule and its reason. A cell the batch did
// not reach (the build was interrupted) is left out.
func buildCells(ctx context.Context, b *image.Batch, cells []*matrix.Cell, progress func(id, status string)) []cellOutcome {
	var sets []image.PatchSet
	for _, c := range cells {
		if c.Pruned == nil {
			sets = append(sets, image.PatchSet{ID: c.ID, Patches: c.Patches, Env: c.Env})
		} else if progress != nil {
			progress(c.ID, statusPruned)
		}
	}
	built := map[string]image.Outcome{}
	for _, o := range b.Run(ctx, sets) {
		built[o.ID] = o
	}
	out := make([]cellOutcome, 0, len(cells))
	for _, c := range cells {
		co := cellOutcome{ID: c.ID, Patches: append([]string{}, c.Patches...)}
		if c.Pruned != nil {
			co.Status, co.Reason = statusPruned, fmt.Sprintf("%s: %s", c.Pruned.Rule, c.Pruned.Reason)
			out = append(out, co)
			continue
		}
		o, ok := built[c.ID]
		if !ok {
			continue
		}
		co.Status, co.Ref, co.Digest, co.PatchSet = o.Status, o.Ref, o.Digest, o.PatchSet
		if o.Err != nil {
			co.Reason, co.Code = o.Err.Error(), exitCodeOf(o.Err)
		}
		out = append(out, co)
	}
	return out
}

// cellsError summarises a matrix build: nil when every cell built (or was
// skipped or pruned); else exit code 4 when a cell's patch conflicts, 1 for
// other failures.
func cellsError(outs []cellOutcome) error {
	failed, conflict := 0, false
	for _, o := range outs {
		if o.Status == image.StatusFailed {
			failed++
			conflict = conflict || o.Code == exitConflict
		}
	}
	if failed == 0 {
		return nil
	}
	code := exitFailure
	if conflict {
		code = exitConflict
	}
	return withCode(code, fmt.Errorf("%d of %d cells failed", failed, len(outs)))
}

// writeRefs records each built or skipped cell's reference (cell id ->
// "repo@sha256:...") in the JSON refs file that `matrix render --refs`
// reads (matrix.ReadRefs). Cells of an earlier build not in outs are kept
// when keep says the matrix still has them (keep nil: all); the file is
// replaced atomically.
func writeRefs(path string, outs []cellOutcome, keep func(id string) bool) error {
	refs, err := matrix.ReadRefs(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		refs = map[string]string{}
	case err != nil:
		return err
	case refs == nil:
		refs = map[string]string{} // the file said null
	}
	for id := range refs {
		if keep != nil && !keep(id) {
			delete(refs, id)
		}
	}
	for _, o := range outs {
		if o.Ref != "" {
			refs[o.ID] = o.Ref
		} else {
			delete(refs, o.ID) // failed or pruned now: an old image would mislead
		}
	}
	data, err := json.MarshalIndent(refs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := renameio.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
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

func printMatrixBuild(w io.Writer, outs []cellOutcome, refs string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	n := map[string]int{}
	for _, o := range outs {
		n[o.Status]++
		detail := o.Ref
		if o.Status == image.StatusFailed || o.Status == statusPruned {
			detail = o.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", o.Status, o.ID, detail)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d built, %d skipped, %d failed, %d pruned; refs in %s\n",
		n[image.StatusBuilt], n[image.StatusSkipped], n[image.StatusFailed], n[statusPruned], refs)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/image"
	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/matrix"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/probe"
)

func init() {
	registerCommand(newImageCmd)
	registerMatrixCommand(newMatrixBuildCmd)
	probeImage = probeImageStatic
}

// probeImageStatic runs the static part of the probe (distributions,
// flashinfer gates and headers, binaries' SM targets) on an image's
// filesystem, read layer by layer without flattening it.
func probeImageStatic(ctx context.Context, ref string) (*probe.Report, error) {
	base, err := image.OpenBase(ctx, ref, image.Remote{}, imageFSOptions())
	if err != nil {
		return nil, err
	}
	var sps []string
	for _, sp := range base.FS.SitePackages() {
		sps = append(sps, "/"+sp)
	}
	return probe.Static(ctx, base.FS, sps)
}

func newImageCmd(g *globalOptions) *cobra.Command {
	c := &cobra.Command{
		Use:   "image",
		Short: "Build images: a base image plus one reproducible patch layer (no Docker daemon)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newImageApplyCmd(g), newImageShowCmd(g))
	return c
}

// imageShowResult is smpatch image show --json.
type imageShowResult struct {
	Ref        string            `json:"ref"`
	Digest     string            `json:"digest"`
	Layers     []string          `json:"layers"`
	Env        []string          `json:"env"`
	Entrypoint []string          `json:"entrypoint"`
	Cmd        []string          `json:"cmd"`
	Labels     map[string]string `json:"labels"`
	Manifest   *image.Manifest   `json:"manifest"` // null when smpatch did not build the image
}

func newImageShowCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "show REF",
		Short: "Show an image's config (env, labels) and the smpatch manifest of its patch layer",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			base, err := image.OpenBase(ctx, args[0], image.Remote{}, imageFSOptions())
			if err != nil {
				return err
			}
			r := imageShowResult{Ref: args[0], Digest: base.Digest.String(), Layers: []string{}}
			m, err := base.Image.Manifest()
			if err != nil {
				return err
			}
			for _, l := range m.Layers {
				r.Layers = append(r.Layers, l.Digest.String())
			}
			cf, err := base.Image.ConfigFile()
			if err != nil {
				return err
			}
			r.Env, r.Entrypoint, r.Cmd, r.Labels = cf.Config.Env, cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.Labels
			if mb, err := base.FS.ReadFile(image.ManifestPath); err == nil {
				r.Manifest = &image.Manifest{}
				if err := json.Unmarshal(mb, r.Manifest); err != nil {
					return fmt.Errorf("%s: /%s: %w", args[0], image.ManifestPath, err)
				}
			}
			w := c.OutOrStdout()
			if asJSON {
				e := json.NewEncoder(w)
				e.SetIndent("", "  ")
				e.SetEscapeHTML(false)
				return e.Encode(r)
			}
			fmt.Fprintf(w, "%s %s, %d layers\n", args[0], r.Digest, len(r.Layers))
			for _, kv := range r.Env {
				fmt.Fprintf(w, "env %s\n", kv)
			}
			keys := make([]string, 0, len(r.Labels))
			for k := range r.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "label %s=%s\n", k, r.Labels[k])
			}
			if r.Manifest == nil {
				fmt.Fprintln(w, "no smpatch manifest")
				return nil
			}
			for _, p := range r.Manifest.Patches {
				fmt.Fprintf(w, "patch %s %s (%s)\n", p.Name, p.Variant, p.Outcome)
			}
			for _, f := range r.Manifest.Files {
				fmt.Fprintf(w, "file %s %s -> %s\n", f.ImagePath, short(f.Original), short(f.New))
			}
			for _, x := range r.Manifest.Whiteouts {
				fmt.Fprintf(w, "removed %s\n", x)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return c
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	if h == "" {
		return "(none)"
	}
	return h
}

// imageApplyOptions are the flags of smpatch image apply.
type imageApplyOptions struct {
	Base   string
	Tag    string
	Env    []string
	Strict bool
	JSON   bool
}

func (o *imageApplyOptions) AddFlags(c *cobra.Command) {
	c.Flags().StringVar(&o.Base, "base", "", "base image: a registry reference, oci:DIR[:NAME] or a docker-save tarball")
	c.Flags().StringVar(&o.Tag, "tag", "", "where the image goes: oci:DIR[:NAME] (an OCI layout) or a registry reference REPO:TAG")
	c.Flags().StringArrayVar(&o.Env, "env", nil, "K=V set in the image config (repeatable; overrides the base's K)")
	c.Flags().BoolVar(&o.Strict, "strict", false, "fuzzy matches count as failures")
	c.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
}

// parseEnv reads K=V flags.
func parseEnv(kvs []string) (map[string]string, error) {
	env := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			return nil, exit.With(exit.Usage, fmt.Errorf("--env %q: want K=V", kv))
		}
		env[k] = v
	}
	return env, nil
}

// imageApplyResult is smpatch image apply --json.
type imageApplyResult struct {
	Base       string               `json:"base"`
	BaseDigest string               `json:"base_digest"`
	Status     string               `json:"status"` // built, skipped
	Ref        string               `json:"ref"`
	Digest     string               `json:"digest"`
	PatchSet   string               `json:"patch_set"`
	Patches    []imagePatchResult   `json:"patches"`
	Files      []image.ManifestFile `json:"files"`
	Whiteouts  []string             `json:"whiteouts"`
	Env        map[string]string    `json:"env"`
}

type imagePatchResult struct {
	Name          string `json:"name"`
	Variant       string `json:"variant"`
	VariantReason string `json:"variant_reason"`
	Outcome       string `json:"outcome"`
	Version       string `json:"version"`
}

func newImageApplyCmd(g *globalOptions) *cobra.Command {
	var o imageApplyOptions
	c := &cobra.Command{
		Use:   "apply NAME... --base REF --tag REF",
		Short: "Apply patches to a base image as one new layer, with env and labels",
		Long: "Read the base image's layers (top-down, honouring whiteouts, without flattening),\n" +
			"find sglang/flashinfer in its site-packages, plan each patch exactly as on a\n" +
			"checkout, and write base + one patch layer (the patched files, whiteouts of their\n" +
			"stale bytecode, /etc/smpatch/manifest.json) to an OCI layout or a registry.",
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if o.Base == "" || o.Tag == "" {
				return exit.With(exit.Usage, errors.New("image apply: --base and --tag are required"))
			}
			env, err := parseEnv(o.Env)
			if err != nil {
				return err
			}
			cat, err := patches.LoadCatalog(g.CatalogDirs())
			if err != nil {
				return err
			}
			var ps []*patches.Patch
			for _, n := range args {
				p, err := cat.Get(n)
				if err != nil {
					return err
				}
				ps = append(ps, p)
			}
			dst, name, err := image.ParseDestination(o.Tag, image.Remote{})
			if err != nil {
				return exit.With(exit.Usage, fmt.Errorf("--tag: %w", err))
			}
			if name == "" {
				if _, ok := dst.(*image.Registry); ok {
					return exit.With(exit.Usage, fmt.Errorf("--tag %s: name a tag (REPO:TAG)", o.Tag))
				}
				name = "latest"
			}
			ctx := c.Context()
			base, err := image.OpenBase(ctx, o.Base, image.Remote{}, imageFSOptions())
			if err != nil {
				return err
			}
			if l, ok := dst.(*image.Layout); ok && base.Ref.Kind == "layout" {
				l.LinkFrom = base.Ref.Dir
			}
			cell := ""
			if len(args) > 0 {
				cell = strings.Join(args, "+")
			}
			res, err := base.Build(ctx, image.Cell{ID: cell, Patches: ps, Env: env}, image.BuildOptions{
				Strict: o.Strict, CatalogDigest: cat.Digest(), Tool: version,
			})
			if err != nil {
				return err
			}
			b := res.Built
			r := imageApplyResult{
				Base: o.Base, BaseDigest: base.Digest.String(), Digest: b.Digest.String(),
				PatchSet: b.Manifest.PatchSet, Files: b.Manifest.Files, Whiteouts: b.Manifest.Whiteouts, Env: b.Manifest.Env,
				Patches: []imagePatchResult{},
			}
			for _, pl := range res.Plans {
				r.Patches = append(r.Patches, imagePatchResult{
					Name: pl.Patch.Name, Variant: patches.VariantLabel(pl.Variant), VariantReason: pl.VariantReason,
					Outcome: string(pl.Outcome()), Version: pl.Version,
				})
			}
			if ref, ok, err := dst.Has(ctx, name, b.Digest); err != nil {
				return err
			} else if ok {
				r.Status, r.Ref = image.StatusSkipped, ref
			} else {
				ref, err := dst.Put(ctx, name, b.Image)
				if err != nil {
					return err
				}
				r.Status, r.Ref = image.StatusBuilt, ref
			}
			return printImageApply(c.OutOrStdout(), &r, o.JSON)
		},
	}
	o.AddFlags(c)
	return c
}

func printImageApply(w io.Writer, r *imageApplyResult, asJSON bool) error {
	if asJSON {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		e.SetEscapeHTML(false)
		return e.Encode(r)
	}
	for _, p := range r.Patches {
		fmt.Fprintf(w, "%s: %s, variant %s (%s)\n", p.Name, p.Outcome, p.Variant, p.VariantReason)
	}
	for _, f := range r.Files {
		fmt.Fprintf(w, "  %s\n", f.ImagePath)
	}
	for _, x := range r.Whiteouts {
		fmt.Fprintf(w, "  removed %s\n", x)
	}
	verb := "wrote"
	if r.Status == image.StatusSkipped {
		verb = "already there:"
	}
	fmt.Fprintf(w, "%s %s\n", verb, r.Ref)
	return nil
}

// matrixBuildOptions are the flags of smpatch matrix build.
type matrixBuildOptions struct {
	matrixOptions
	Out    string
	Push   string
	Only   []string
	Refs   string
	Strict bool
	JSON   bool
}

func (o *matrixBuildOptions) AddFlags(c *cobra.Command) {
	o.matrixOptions.AddFlags(c)
	c.Flags().StringVar(&o.Out, "out", "", "write every cell's image into this OCI layout directory, or docker-archive:FILE[:REPO] (one docker-save tarball, images tagged REPO:ID)")
	c.Flags().StringVar(&o.Push, "push", "", "push every cell's image to this repository, tagged with the cell id")
	c.Flags().StringArrayVar(&o.Only, "only", nil, "build only this cell (repeatable)")
	c.Flags().StringVar(&o.Refs, "refs", "", "refs file to write, cell id -> repo@sha256:... (default DIR/refs.json with --out, ./refs.json with --push)")
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

func newMatrixBuildCmd(g *globalOptions) *cobra.Command {
	var o matrixBuildOptions
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
			if (o.Out == "") == (o.Push == "") {
				return exit.With(exit.Usage, errors.New("matrix build: give one of --out DIR or --push REPO"))
			}
			x, err := expandMatrix(g, args[0], &o.matrixOptions)
			if err != nil {
				return err
			}
			cells, err := selectCells(x, o.Only)
			if err != nil {
				return err
			}
			if x.Matrix.Base.Image == "" {
				return fmt.Errorf("%s: [base] image is not set; matrix build needs a base image", args[0])
			}
			baseRef := matrixBaseRef(x.Matrix.Base.Image, filepath.Dir(args[0]))
			cat, err := patches.LoadCatalog(g.CatalogDirs())
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
					refs = "refs.json"
				}
			}
			ctx := c.Context()
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
				Options: image.BuildOptions{Strict: o.Strict, CatalogDigest: cat.Digest(), Tool: version},
			}
			if errw := c.ErrOrStderr(); isTerminal(errw) {
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
			w := c.OutOrStdout()
			if o.JSON {
				e := json.NewEncoder(w)
				e.SetIndent("", "  ")
				e.SetEscapeHTML(false)
				if err := e.Encode(matrixBuildResult{Base: baseRef, BaseDigest: base.Digest.String(), Dest: dst.String(), Refs: refs, Cells: outs}); err != nil {
					return err
				}
			} else {
				printMatrixBuild(w, outs, refs)
			}
			return image.ExitError(outs)
		},
	}
	o.AddFlags(c)
	return c
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

// imageFSOptions index base images with smpatch's layer index cache, so a
// multi-GB base is streamed once, not on every build.
func imageFSOptions() image.FSOptions {
	return image.FSOptions{IndexCache: image.DefaultIndexCache()}
}

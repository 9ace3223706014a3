package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/image"
	"github.com/smpatch/smpatch/internal/termsafe"
	"github.com/smpatch/smpatch/patches"
)

// smpatch image apply: one image with the named patches.

// imageApplyOptions are smpatch image apply's flags, arguments, streams
// and dependencies.
type imageApplyOptions struct {
	IO       IOStreams
	Catalog  func() (*patches.Catalog, error)
	Registry func(registryFlags) (image.Remote, error)
	Info     func(io.Writer) io.Writer

	registryFlags
	Patches []string // the arguments
	Base    string
	Tag     string
	Env     []string
	Strict  bool
	JSON    bool
}

func (o *imageApplyOptions) AddFlags(c *cobra.Command) {
	c.Flags().StringVar(&o.Base, "base", "", "base image: a registry reference, oci:DIR[:NAME] or a docker-save tarball")
	c.Flags().StringVar(&o.Tag, "out", "", "where the image goes: oci:DIR[:NAME] (an OCI layout) or a registry reference REPO:TAG")
	HiddenAlias(c, "tag", "out")
	c.Flags().StringArrayVar(&o.Env, "env", nil, "K=V set in the image config (repeatable; overrides the base's K)")
	c.Flags().BoolVar(&o.Strict, "strict", false, "fuzzy matches count as failures")
	c.Flags().BoolVar(&o.JSON, "json", false, "print the result as JSON")
	o.registryFlags.AddFlags(c)
}

// parseEnv reads K=V flags.
func parseEnv(kvs []string) (map[string]string, error) {
	env := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t\n") {
			return nil, withCode(exitUsage, fmt.Errorf("--env %q: want K=V", kv))
		}
		env[k] = v
	}
	return env, nil
}

// imageApplyResult is smpatch image apply --json.
type imageApplyResult struct {
	Base            string               `json:"base"`
	BaseDigest      string               `json:"base_digest"`
	Platform        string               `json:"platform"`         // the base's, "" when it names none
	PlatformDefault bool                 `json:"platform_default"` // an index resolved without --platform
	Status          string               `json:"status"`           // built, skipped
	Ref             string               `json:"ref"`
	Digest          string               `json:"digest"`
	PatchSet        string               `json:"patch_set"`
	Patches         []imagePatchResult   `json:"patches"`
	Files           []image.ManifestFile `json:"files"`
	Whiteouts       []string             `json:"whiteouts"`
	Env             map[string]string    `json:"env"`
}

type imagePatchResult struct {
	Name          string `json:"name"`
	Variant       string `json:"variant"`
	VariantReason string `json:"variant_reason"`
	Outcome       string `json:"outcome"`
	Version       string `json:"version"`
}

func newImageApplyCmd(f *Factory) *cobra.Command {
	o := &imageApplyOptions{Catalog: f.Catalog, Registry: f.Registry, Info: f.Info}
	c := &cobra.Command{
		Use:   "apply NAME... --base REF --out DEST",
		Short: "Apply patches to a base image as one new layer, with env and labels",
		Long: "Read the base image's layers (top-down, honouring whiteouts, without flattening),\n" +
			"find sglang/flashinfer in its site-packages, plan each patch exactly as on a\n" +
			"checkout, and write base + one patch layer (the patched files, whiteouts of their\n" +
			"stale bytecode, /etc/smpatch/manifest.json) to an OCI layout or a registry.\n\n" + platformHelp,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Patches = streams(c), args
			return runImageApply(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runImageApply(ctx context.Context, o *imageApplyOptions) error {
	if o.Base == "" || o.Tag == "" {
		return withCode(exitUsage, errors.New("image apply: --base and --out are required"))
	}
	env, err := parseEnv(o.Env)
	if err != nil {
		return err
	}
	rem, err := o.Registry(o.registryFlags)
	if err != nil {
		return err
	}
	cat, err := o.Catalog()
	if err != nil {
		return err
	}
	var ps []*patches.Patch
	for _, n := range o.Patches {
		p, err := cat.Get(n)
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	dst, name, err := image.ParseDestination(o.Tag, rem)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("--out: %w", err))
	}
	if name == "" {
		if _, ok := dst.(*image.Registry); ok {
			return withCode(exitUsage, fmt.Errorf("--out %s: name a tag (REPO:TAG)", o.Tag))
		}
		name = "latest"
	}
	base, err := openBase(ctx, o.Info(o.IO.ErrOut), o.Base, rem)
	if err != nil {
		return err
	}
	if l, ok := dst.(*image.Layout); ok && base.Ref.Kind == "layout" {
		l.LinkFrom = base.Ref.Dir
	}
	res, err := base.Build(ctx, image.Cell{ID: strings.Join(o.Patches, "+"), Patches: ps, Env: env}, image.BuildOptions{
		Strict: o.Strict, CatalogDigest: cat.Digest(), Tool: Version,
	})
	if err != nil {
		return err
	}
	b := res.Built
	r := imageApplyResult{
		Base: o.Base, BaseDigest: base.Digest.String(), Platform: base.Platform, PlatformDefault: base.PlatformDefault,
		Digest: b.Digest.String(), PatchSet: b.Manifest.PatchSet, Files: b.Manifest.Files, Whiteouts: b.Manifest.Whiteouts,
		Env: b.Manifest.Env, Patches: []imagePatchResult{},
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
	return printImageApply(o.IO.Out, &r, o.JSON)
}

func printImageApply(w io.Writer, r *imageApplyResult, asJSON bool) error {
	if asJSON {
		return WriteJSON(w, r)
	}
	// One record a line, piped or not: names from the base image (a file
	// named "a\nwrote ...") have their control characters escaped.
	l := termsafe.Line
	for _, p := range r.Patches {
		fmt.Fprintf(w, "%s: %s, variant %s (%s)\n", l(p.Name), p.Outcome, l(p.Variant), l(p.VariantReason))
	}
	for _, f := range r.Files {
		fmt.Fprintf(w, "  %s\n", l(f.ImagePath))
	}
	for _, x := range r.Whiteouts {
		fmt.Fprintf(w, "  removed %s\n", l(x))
	}
	verb := "wrote"
	if r.Status == image.StatusSkipped {
		verb = "already there:"
	}
	fmt.Fprintf(w, "%s %s\n", verb, l(r.Ref))
	return nil
}

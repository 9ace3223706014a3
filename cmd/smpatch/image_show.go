package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/image"
	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/termsafe"
)

// smpatch image show REF: the projects and patches an image holds.

// imageShowResult is smpatch image show --json.
type imageShowResult struct {
	Ref             string            `json:"ref"`
	Digest          string            `json:"digest"`
	Platform        string            `json:"platform"`         // "" when the config names none
	PlatformDefault bool              `json:"platform_default"` // an index resolved without --platform
	Layers          []string          `json:"layers"`
	Env             []string          `json:"env"`
	Entrypoint      []string          `json:"entrypoint"`
	Cmd             []string          `json:"cmd"`
	Labels          map[string]string `json:"labels"`
	Manifest        *image.Manifest   `json:"manifest"` // null when smpatch did not build the image
}

// imageShowOptions are smpatch image show's flags, argument, streams and
// dependencies.
type imageShowOptions struct {
	IO       IOStreams
	Registry func(registryFlags) (image.Remote, error)
	Info     func(io.Writer) io.Writer

	registryFlags
	Ref  string // the argument
	JSON bool
}

func (o *imageShowOptions) AddFlags(c *cobra.Command) {
	c.Flags().BoolVar(&o.JSON, "json", false, "print as JSON")
	o.registryFlags.AddFlags(c)
}

func newImageShowCmd(f *Factory) *cobra.Command {
	o := &imageShowOptions{Registry: f.Registry, Info: f.Info}
	c := &cobra.Command{
		Use:   "show REF",
		Short: "Show an image's config (env, labels) and the smpatch manifest of its patch layer",
		Long: "Print an image's digest, platform, layers, env and labels and, for an image\n" +
			"smpatch built (it has the io.smpatch.patch-set label), the manifest of its\n" +
			"patch layer. The layers of an image smpatch did not build are not read.\n\n" + platformHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Ref = streams(c), args[0]
			return runImageShow(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

// maxManifestJSON bounds /etc/smpatch/manifest.json read from an image.
const maxManifestJSON = 16 << 20

func runImageShow(ctx context.Context, o *imageShowOptions) error {
	rem, err := o.Registry(o.registryFlags)
	if err != nil {
		return err
	}
	base, err := image.OpenImage(ctx, o.Ref, rem)
	if err != nil {
		return err
	}
	notePlatform(o.Info(o.IO.ErrOut), o.Ref, base)
	r := imageShowResult{Ref: o.Ref, Digest: base.Digest.String(), Platform: base.Platform, PlatformDefault: base.PlatformDefault, Layers: []string{}}
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
	if _, ours := r.Labels[image.LabelPatchSet]; ours {
		if err := base.Index(ctx, image.FSOptions{IndexCache: image.DefaultIndexCache()}); err != nil {
			return err
		}
		if mb, err := bounded.ReadFile(base.FS, image.ManifestPath, maxManifestJSON); err == nil {
			r.Manifest = &image.Manifest{}
			if err := json.Unmarshal(mb, r.Manifest); err != nil {
				return fmt.Errorf("%s: /%s: %w", o.Ref, image.ManifestPath, err)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: /%s: %w", o.Ref, image.ManifestPath, err)
		}
	}
	return printImageShow(o.IO.Out, &r, o.JSON)
}

func printImageShow(w io.Writer, r *imageShowResult, asJSON bool) error {
	if asJSON {
		return WriteJSON(w, r)
	}
	// One record a line, piped or not: what the image's config and
	// manifest say has its control characters escaped.
	l := termsafe.Line
	fmt.Fprintf(w, "%s %s, %d layers\n", l(r.Ref), r.Digest, len(r.Layers))
	if r.Platform != "" {
		fmt.Fprintf(w, "platform %s\n", l(r.Platform))
	}
	for _, kv := range r.Env {
		fmt.Fprintf(w, "env %s\n", l(kv))
	}
	keys := slices.Sorted(maps.Keys(r.Labels))
	for _, k := range keys {
		fmt.Fprintf(w, "label %s=%s\n", l(k), l(r.Labels[k]))
	}
	if r.Manifest == nil {
		fmt.Fprintln(w, "no smpatch manifest")
		return nil
	}
	for _, p := range r.Manifest.Patches {
		fmt.Fprintf(w, "patch %s %s (%s)\n", l(p.Name), l(p.Variant), l(p.Outcome))
	}
	for _, f := range r.Manifest.Files {
		fmt.Fprintf(w, "file %s %s -> %s\n", l(f.ImagePath), l(short(f.Original)), l(short(f.New)))
	}
	for _, x := range r.Manifest.Whiteouts {
		fmt.Fprintf(w, "removed %s\n", l(x))
	}
	return nil
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

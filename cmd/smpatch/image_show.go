package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/image"
)

// smpatch image show REF: the projects and patches an image holds.

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

// imageShowOptions are the flags of smpatch image show.
type imageShowOptions struct {
	JSON bool
}

func (o *imageShowOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.BoolVar(&o.JSON, "json", false, "print as JSON")
}

func newImageShowCmd(g *Globals) *cobra.Command {
	o := &imageShowOptions{}
	c := &cobra.Command{
		Use:   "show REF",
		Short: "Show an image's config (env, labels) and the smpatch manifest of its patch layer",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runImageShow(c.Context(), g, o, args, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	o.AddFlags(c)
	return c
}

func runImageShow(ctx context.Context, g *Globals, o *imageShowOptions, args []string, w, errw io.Writer) error {
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
	if o.JSON {
		return WriteJSON(w, r)
	}
	fmt.Fprintf(w, "%s %s, %d layers\n", args[0], r.Digest, len(r.Layers))
	for _, kv := range r.Env {
		fmt.Fprintf(w, "env %s\n", kv)
	}
	keys := slices.Sorted(maps.Keys(r.Labels))
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

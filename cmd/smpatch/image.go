package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/image"
	"github.com/smpatch/smpatch/probe"
)

// smpatch image: the parent of show and apply, and what they share.

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

func newImageCmd(f *Factory) *cobra.Command {
	g := f.Globals
	c := &cobra.Command{
		Use:   "image",
		Short: "Build images: a base image plus one reproducible patch layer (no Docker daemon)",
		Args:  GroupArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newImageApplyCmd(g), newImageShowCmd(g))
	return c
}

// imageFSOptions index base images with smpatch's layer index cache, so a
// multi-GB base is streamed once, not on every build.
func imageFSOptions() image.FSOptions {
	return image.FSOptions{IndexCache: image.DefaultIndexCache()}
}

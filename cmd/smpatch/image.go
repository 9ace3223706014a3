package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/image"
	"github.com/smpatch/smpatch/probe"
)

// smpatch image: the parent of show and apply, and what the commands that
// read images share (image apply, image show, matrix build, probe --image).

func newImageCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "image",
		Short: "Build images: a base image plus one reproducible patch layer (no Docker daemon)",
		Args:  GroupArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newImageApplyCmd(f), newImageShowCmd(f))
	return c
}

// platformHelp is the --help paragraph of every command with --platform.
const platformHelp = `--platform OS/ARCH[/VARIANT] picks the image of a multi-platform index (a
registry's or an OCI layout's): linux/arm64 on GH200, GB200 and DGX Spark
hosts. Without it an index resolves to linux/amd64, and stderr says so; a
single image is taken as it is, and with --platform it must be of that
platform. --registry-timeout bounds each wait on a registry (connecting, a
response's headers, any pause in a transfer).`

// registryFlags are --platform and --registry-timeout.
type registryFlags struct {
	Platform string
	Timeout  time.Duration
}

func (r *registryFlags) AddFlags(c *cobra.Command) {
	c.Flags().StringVar(&r.Platform, "platform", "", "the image of a multi-platform index to use, `OS/ARCH[/VARIANT]` (linux/arm64 on GH200/GB200/DGX Spark; default linux/amd64)")
	c.Flags().DurationVar(&r.Timeout, "registry-timeout", image.DefaultTimeout, "bound on each wait on a registry: connecting, a response's headers, any pause in a transfer")
	_ = c.RegisterFlagCompletionFunc("platform", cobra.FixedCompletions([]string{"linux/amd64", "linux/arm64"}, cobra.ShellCompDirectiveNoFileComp))
}

// remote turns the flags into registry access: the default keychain, the
// platform, a transport that bounds every wait.
func (r registryFlags) remote() (image.Remote, error) {
	var rem image.Remote
	if r.Platform != "" {
		p, err := image.ParsePlatform(r.Platform)
		if err != nil {
			return rem, withCode(exitUsage, fmt.Errorf("--platform: %w", err))
		}
		rem.Platform = p
	}
	if r.Timeout <= 0 {
		return rem, withCode(exitUsage, fmt.Errorf("--registry-timeout %s: want a positive duration, like 30s", r.Timeout))
	}
	rem.Transport = image.NewTransport(r.Timeout)
	return rem, nil
}

// openBase opens and indexes a base image with smpatch's layer index
// cache, so a multi-GB base is streamed once, not on every build, and says
// on w which image of a multi-platform index it took when no --platform
// named one.
func openBase(ctx context.Context, w io.Writer, ref string, rem image.Remote) (*image.Base, error) {
	b, err := image.OpenBase(ctx, ref, rem, image.FSOptions{IndexCache: image.DefaultIndexCache()})
	if err != nil {
		return nil, err
	}
	notePlatform(w, ref, b)
	return b, nil
}

// notePlatform says which image of a multi-platform index is used when no
// --platform picked it.
func notePlatform(w io.Writer, ref string, b *image.Base) {
	if b.PlatformDefault {
		fmt.Fprintf(w, "smpatch: %s is a multi-platform index: using its %s image (--platform picks another: linux/arm64 on GH200, GB200 and DGX Spark)\n", ref, b.Platform)
	}
}

// imageProbe is probe --image: its flags and what it needs.
type imageProbe struct {
	registryFlags
	Registry func(registryFlags) (image.Remote, error)
	Info     func(io.Writer) io.Writer
}

func newImageProbe(f *Factory) *imageProbe {
	return &imageProbe{Registry: f.Registry, Info: f.Info}
}

// set reports whether a flag only --image takes was given.
func (p *imageProbe) set(c *cobra.Command) bool {
	return c.Flags().Changed("platform") || c.Flags().Changed("registry-timeout")
}

// static runs the static part of the probe (distributions, flashinfer
// gates and headers, binaries' SM targets) on an image's filesystem, read
// layer by layer without flattening it; its files are read within timeout
// (probe's --timeout), the image's opening aside.
func (p *imageProbe) static(ctx context.Context, errw io.Writer, ref string, timeout time.Duration) (*probe.Report, error) {
	rem, err := p.Registry(p.registryFlags)
	if err != nil {
		return nil, err
	}
	base, err := openBase(ctx, p.Info(errw), ref, rem)
	if err != nil {
		return nil, err
	}
	var sps []string
	for _, sp := range base.FS.SitePackages() {
		sps = append(sps, "/"+sp)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, err := probe.Static(sctx, base.FS, sps)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("its files not read within --timeout %s", timeout)
	}
	return r, err
}

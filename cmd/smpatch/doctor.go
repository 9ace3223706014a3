package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/doctor"
	"github.com/smpatch/smpatch/image"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/probe"
	"github.com/smpatch/smpatch/source"
)

// smpatch doctor: every known obstacle a launch meets on this host,
// before the model loads. It writes nothing.

// doctorOptions are smpatch doctor's flags, streams and dependencies.
type doctorOptions struct {
	IO IOStreams
	// Tree resolves --repo (or the default tree); Probe probes this
	// machine when no --probe-file is given.
	Tree  func(ctx context.Context, repo string, project source.Project) (source.WritableTree, error)
	Probe func(ctx context.Context, o probe.Options) (*probe.Report, error)
	image *imageProbe // --image's registry access and flags
	// Catalog is the catalog whose patches the remedies name.
	Catalog func() (*patches.Catalog, error)
	// Python is the interpreter whose environment the live probe reads.
	Python  string
	Verbose bool

	Repo         string
	SitePackages string
	Image        string
	ProbeFile    string
	Model        string
	JSON         bool
	List         bool
	Launch       []string
}

func (o *doctorOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the sglang checkout (default: $SMPATCH_REPO, the current checkout, or the installed sglang)")
	f.StringVar(&o.SitePackages, "site-packages", "", "the site-packages `DIR` of the sglang to check (its installed packages are read there too)")
	f.StringVar(&o.Image, "image", "", "check the sglang installed in the container image `REF` (the host comes from --probe-file or this machine)")
	f.StringVar(&o.ProbeFile, "probe-file", "", "read the host from a saved probe report (smpatch probe -o FILE) instead of probing")
	f.StringVar(&o.Model, "model", "", "the model `DIR` whose config.json is read (default: the launch's --model-path when it is a local directory)")
	f.BoolVar(&o.JSON, "json", false, "print the report (or the rules) as JSON")
	f.BoolVar(&o.List, "list", false, "print the rules, with their measured windows")
	o.image.AddFlags(c)
}

func newDoctorCmd(f *Factory) *cobra.Command {
	g := f.Globals
	o := &doctorOptions{Tree: f.Tree, Probe: probe.Run, image: newImageProbe(f), Catalog: f.Catalog}
	c := &cobra.Command{
		Use:   "doctor [--repo DIR | --site-packages DIR | --image REF] [--probe-file F] [--model DIR] [-- LAUNCH COMMAND...]",
		Short: "Find every known SM12x obstacle of a launch before the model loads, with evidence and remedies",
		Long: `doctor reads the host (the probe, or a saved report), the sglang tree and
what is installed beside it, the model's config.json (--model, or the
launch's --model-path when it is a local directory) and the launch's flags
as that tree's server_args.py parses them, and prints one finding per
obstacle: what will happen, its severity, the evidence, the remedy and the
source. What it could not read it says it could not read.

Exit 0 without blockers, 3 with one, 1 on bad input (a missing or malformed
config.json, an unknown architecture, a launch that is not sglang, a tree
whose version cannot be read). The rules are in docs/doctor.md (--list).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			at := c.ArgsLenAtDash()
			if at < 0 && len(args) > 0 || at > 0 {
				return withCode(exitUsage, fmt.Errorf("doctor: unexpected argument %q: the launch command goes after --", args[0]))
			}
			if o.image.set(c) && o.Image == "" {
				return withCode(exitUsage, errors.New("doctor: --platform and --registry-timeout go with --image"))
			}
			o.IO, o.Launch, o.Python, o.Verbose = streams(c), args, g.PythonPath(), g.Verbose
			return runDoctor(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runDoctor(ctx context.Context, o *doctorOptions) error {
	n := 0
	for _, s := range []string{o.Repo, o.SitePackages, o.Image} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return withCode(exitUsage, errors.New("doctor: --repo, --site-packages and --image name the tree: give one"))
	}
	rules, err := doctor.Rules()
	if err != nil {
		return err
	}
	if o.List {
		return listRules(o, rules)
	}
	in, err := o.inputs(ctx)
	if err != nil {
		return err
	}
	rep, err := doctor.Run(ctx, in, rules)
	if err != nil {
		return err
	}
	if o.JSON {
		if err := WriteJSON(o.IO.Out, rep); err != nil {
			return err
		}
	} else if err := doctor.WriteText(o.IO.Out, rep, o.Verbose); err != nil {
		return err
	}
	if rep.Blockers > 0 {
		return silentCode(exitRefused)
	}
	return nil
}

func listRules(o *doctorOptions, rules []*doctor.Rule) error {
	win, err := doctor.BuiltinWindows()
	if err != nil {
		return err
	}
	if o.JSON {
		type ruleJSON struct {
			*doctor.Rule
			Conditions []string       `json:"conditions"`
			Window     *doctor.Window `json:"window"`
		}
		out := struct {
			Rules []ruleJSON `json:"rules"`
		}{Rules: []ruleJSON{}}
		for _, r := range rules {
			out.Rules = append(out.Rules, ruleJSON{Rule: r, Conditions: r.Conditions(), Window: win.Of(r.ID)})
		}
		return WriteJSON(o.IO.Out, out)
	}
	doctor.WriteList(o.IO.Out, rules, win)
	return nil
}

// inputs opens the tree, reads the host and sets the launch's environment.
func (o *doctorOptions) inputs(ctx context.Context) (doctor.Inputs, error) {
	in := doctor.Inputs{ModelDir: o.Model, Env: environ()}
	if len(o.Launch) > 0 {
		in.Launch = o.Launch
	}
	var static *probe.Report
	switch {
	case o.Image != "":
		base, err := o.image.open(ctx, o.IO.ErrOut, o.Image)
		if err != nil {
			return in, fmt.Errorf("doctor --image %s: %w", o.Image, err)
		}
		if t, err := base.Tree(source.SGLang); err == nil {
			in.Tree = t
			if d := t.Location().Dist; d != nil {
				in.Requires = d.Metadata["Requires-Dist"]
				if in.Requires == nil {
					in.Requires = []string{}
				}
			}
		} else {
			in.NoTree = err.Error()
		}
		var sps []string
		for _, sp := range base.FS.SitePackages() {
			sps = append(sps, "/"+sp)
		}
		if static, err = probe.Static(ctx, base.FS, sps); err != nil {
			return in, fmt.Errorf("doctor --image %s: %w", o.Image, err)
		}
	case o.SitePackages != "":
		t, err := source.OpenSitePackages(o.SitePackages, source.SGLang)
		if err != nil {
			return in, fmt.Errorf("doctor --site-packages: %w", err)
		}
		in.Tree = t
	default:
		t, err := o.Tree(ctx, o.Repo, source.SGLang)
		switch {
		case err == nil:
			in.Tree = t
		case o.Repo != "":
			return in, err
		default:
			in.NoTree = err.Error()
		}
	}
	host, from, err := o.host(ctx)
	if err != nil {
		return in, err
	}
	if static != nil {
		// The image's packages, on the host of the report or this machine.
		static.Host = nil
		if host != nil {
			static.Host = host.Host
			for k, v := range host.Unknown {
				if strings.HasPrefix(k, "host") {
					if static.Unknown == nil {
						static.Unknown = map[string]string{}
					}
					static.Unknown[k] = v
				}
			}
		}
		host, from = static, "image "+o.Image+" on "+from
	}
	in.Host, in.HostFrom = host, from
	if in.Tree != nil {
		in.PatchFit = o.patchFit(in.Tree)
	}
	return in, nil
}

// patchFit plans a remedy's patch on t, writing nothing, and says how it
// fares there in a few words.
func (o *doctorOptions) patchFit(t source.Tree) func(context.Context, string) string {
	return func(ctx context.Context, name string) string {
		cat, err := o.Catalog()
		if err != nil {
			return "unknown (the catalog: " + err.Error() + ")"
		}
		p, err := cat.Get(name)
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		pl, err := patches.PlanWithNeeds(ctx, p, t, patches.PlanOptions{})
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		return patches.FitLine(pl)
	}
}

// host is the saved report, or a live probe of this machine (of the
// --site-packages given, else of --python's environment).
func (o *doctorOptions) host(ctx context.Context) (*probe.Report, string, error) {
	if o.ProbeFile != "" {
		r, err := probe.ReadReport(o.ProbeFile)
		if err != nil {
			return nil, "", fmt.Errorf("--probe-file: %w", err)
		}
		return r, o.ProbeFile, nil
	}
	po := probe.Options{Python: o.Python}
	if o.SitePackages != "" {
		po.SitePackages = []string{o.SitePackages}
	}
	r, err := o.Probe(ctx, hostRoots(po))
	if err != nil {
		return nil, "", fmt.Errorf("doctor: probe: %w", err)
	}
	return r, "live probe of this machine", nil
}

// open opens the image REF for doctor --image.
func (p *imageProbe) open(ctx context.Context, errw io.Writer, ref string) (*image.Base, error) {
	rem, err := p.Registry(p.registryFlags)
	if err != nil {
		return nil, err
	}
	return openBase(ctx, p.Info(errw), ref, rem)
}

// environ is the process environment as a map.
func environ() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
	"github.com/smpatch/smpatch/upstream"
)

// smpatch check: every patch planned on upstream revisions, read-only.

// checkOptions are smpatch check's flags, streams and dependencies.
type checkOptions struct {
	IO        IOStreams
	Catalog   func() (*patches.Catalog, error)
	RepoCache func() (*gitrepo.RepoCache, error)
	Verbose   bool // --verbose: every variant's attempt

	Upstreams []string
	Repo      string
	Range     string
	Format    string
	FormatSet bool // --format given
	Strict    bool
	JSON      bool
	// CatalogOnly: only the patches of the --catalog directories.
	CatalogOnly bool
}

func (o *checkOptions) AddFlags(c *cobra.Command) {
	fl := c.Flags()
	fl.StringArrayVar(&o.Upstreams, "upstream", nil, "upstream revision PROJECT[=URL]@REF to check (repeatable), e.g. sglang@main")
	fl.StringVar(&o.Repo, "repo", "", "check this checkout (or, with --range, its history) instead of an upstream")
	fl.StringVar(&o.Range, "range", "", "walk the commits A..B (B defaults to the --upstream REF, or HEAD)")
	fl.StringVar(&o.Format, "format", "text", "report format: "+strings.Join(upstream.Formats, ", "))
	fl.BoolVar(&o.Strict, "strict", false, "count fuzzy matches as failures")
	fl.BoolVar(&o.JSON, "json", false, "same as --format json")
	fl.BoolVar(&o.CatalogOnly, "catalog-only", false, "check only the patches of the --catalog directories, not the built-in ones (those they need are still planned first)")
}

func newCheckCmd(f *Factory) *cobra.Command {
	o := &checkOptions{Catalog: f.Catalog, RepoCache: f.RepoCache}
	c := &cobra.Command{
		Use:   "check [--upstream PROJECT[=URL]@REF]... [--repo DIR] [--range A..B]",
		Short: "Check that every patch still applies upstream (read-only, for CI)",
		Long: `Plan every catalog patch of a project on an upstream revision read straight
from the object store (no work tree) and report one status per patch:
applies, fuzzy, already-upstream (time to retire the patch), conflict or
no-variant. Exit 4 when a patch conflicts or has no variant (or is fuzzy,
with --strict).

With --range A..B, walk the commits from A to B (first parents) that change
a patch's target files and report where its status changed.
Without --upstream, the checkout --repo DIR ($SMPATCH_REPO, else the current
directory) is checked, or with --range its git history.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.IO, o.Verbose, o.FormatSet = streams(c), f.Verbose, c.Flags().Changed("format")
			return runCheck(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

// checkRun is one check's report as it is filled.
type checkRun struct {
	o        *checkOptions
	opts     upstream.Options
	rp       *upstream.Report
	firstErr error
}

// fail records every patch of ps as not checked on where, for err.
func (r *checkRun) fail(p source.Project, ps []*patches.Patch, where string, err error) {
	if r.firstErr == nil {
		r.firstErr = err
	}
	for _, pt := range ps {
		r.rp.Results = append(r.rp.Results, upstream.Result{Project: p, Patch: pt.Name, Status: upstream.Error, Revision: where, Detail: err.Error(), Source: pt.File, SourceLine: 1})
	}
}

func runCheck(ctx context.Context, o *checkOptions) error {
	targets, rng, err := o.parse()
	if err != nil {
		return err
	}
	cat, err := o.Catalog()
	if err != nil {
		return err
	}
	r := &checkRun{o: o, opts: upstream.Options{Strict: o.Strict}, rp: &upstream.Report{Strict: o.Strict, Verbose: o.Verbose}}
	if IsTerminal(o.IO.ErrOut) {
		r.opts.Progress = RawWriter(o.IO.ErrOut) // counts only, with its own \r\033[K
	}
	if len(targets) == 0 {
		dir := cmp.Or(o.Repo, os.Getenv("SMPATCH_REPO"), ".")
		if err := r.checkRepo(ctx, cat, dir, rng); err != nil {
			return err
		}
	}
	var rc *gitrepo.RepoCache
	for _, t := range targets {
		ps := o.patchesOf(cat, t.Project)
		if len(ps) == 0 {
			fmt.Fprintf(o.IO.ErrOut, "smpatch: check: the catalog has no %s patches; nothing to check on %s\n", t.Project, t)
			continue
		}
		if rc == nil {
			if rc, err = o.RepoCache(); err != nil {
				return fmt.Errorf("check: %w", err)
			}
		}
		u, err := rc.Open(ctx, t.URL)
		if err != nil {
			r.fail(t.Project, ps, t.URL+"@"+t.Ref, err)
			continue
		}
		rs, err := upstream.CheckUpstream(ctx, u, t, rng, ps, r.opts)
		if err != nil {
			where := t.URL
			if rng[0] == "" {
				where += "@" + t.Ref
			}
			r.fail(t.Project, ps, where, err)
			continue
		}
		r.rp.Results = append(r.rp.Results, rs...)
	}
	return finishCheck(o, r.rp, r.firstErr)
}

// parse checks the flags: the targets, the range, the format.
func (o *checkOptions) parse() ([]upstream.Target, [2]string, error) {
	var rng [2]string
	if o.JSON {
		if o.FormatSet && o.Format != "json" {
			return nil, rng, withCode(exitUsage, fmt.Errorf("check: --json and --format %s disagree; give one", o.Format))
		}
		o.Format = "json"
	}
	if !slices.Contains(upstream.Formats, o.Format) {
		return nil, rng, withCode(exitUsage, fmt.Errorf("check: unknown --format %q (want %s)", o.Format, strings.Join(upstream.Formats, ", ")))
	}
	var targets []upstream.Target
	for _, s := range o.Upstreams {
		t, err := upstream.ParseTarget(s)
		if err != nil {
			return nil, rng, withCode(exitUsage, fmt.Errorf("check: --upstream %w", err))
		}
		targets = append(targets, t)
	}
	if len(targets) > 0 && o.Repo != "" {
		return nil, rng, withCode(exitUsage, errors.New("check: give --upstream or --repo, not both"))
	}
	if o.Range != "" {
		a, b, ok := strings.Cut(o.Range, "..")
		if !ok || a == "" || strings.HasPrefix(b, ".") {
			return nil, rng, withCode(exitUsage, fmt.Errorf("check: --range %q: want A..B (B may be omitted)", o.Range))
		}
		rng = [2]string{a, b}
	}
	return targets, rng, nil
}

// patchesOf are the patches of project p the check plans: every one, or
// with --catalog-only those of the --catalog directories.
func (o *checkOptions) patchesOf(cat *patches.Catalog, p source.Project) []*patches.Patch {
	ps := cat.ForProject(p)
	if !o.CatalogOnly {
		return ps
	}
	var out []*patches.Patch
	for _, x := range ps {
		if x.Origin != catalog.BuiltinOrigin {
			out = append(out, x)
		}
	}
	return out
}

// checkRepo checks a local checkout, or with a range its git history.
func (r *checkRun) checkRepo(ctx context.Context, cat *patches.Catalog, dir string, rng [2]string) error {
	tree, err := source.OpenCheckout(dir)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	ps := r.o.patchesOf(cat, tree.Project())
	if len(ps) == 0 {
		fmt.Fprintf(r.o.IO.ErrOut, "smpatch: check: the catalog has no %s patches\n", tree.Project())
		return nil
	}
	rs, err, rerr := upstream.CheckCheckout(ctx, tree, rng, ps, r.opts)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if rerr != nil {
		r.fail(tree.Project(), ps, tree.Root(), rerr)
		return nil
	}
	r.rp.Results = append(r.rp.Results, rs...)
	return nil
}

// finishCheck prints the report and turns it into the exit code.
func finishCheck(o *checkOptions, rp *upstream.Report, firstErr error) error {
	if err := rp.Write(o.IO.Out, o.Format); err != nil {
		return err
	}
	if o.Format == "github" {
		if p := os.Getenv("GITHUB_STEP_SUMMARY"); p != "" {
			// A summary that cannot be written is a warning: the exit code
			// stays the check's own.
			if err := appendCheckSummary(p, rp); err != nil {
				fmt.Fprintf(o.IO.ErrOut, "smpatch: warning: step summary: %v\n", err)
			}
		}
	}
	if firstErr != nil {
		n := rp.Counts()[upstream.Error]
		return fmt.Errorf("check: %d patch(es) could not be checked: %w", n, firstErr)
	}
	if rp.Failed() > 0 {
		return silentCode(exitConflict)
	}
	return nil
}

// appendCheckSummary appends the check's Markdown table to path.
func appendCheckSummary(path string, rp *upstream.Report) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	werr := rp.WriteStepSummary(f)
	if err := f.Close(); werr == nil {
		werr = err
	}
	return werr
}

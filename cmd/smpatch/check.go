package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
	"github.com/smpatch/smpatch/upstream"
)

type checkOptions struct {
	Upstreams []string
	Repo      string
	Range     string
	Format    string
	Strict    bool
	JSON      bool
}

func newCheckCmd(f *Factory) *cobra.Command {
	g := f.Globals
	o := &checkOptions{}
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
		RunE: func(c *cobra.Command, _ []string) error { return runCheck(c, g, o) },
	}
	fl := c.Flags()
	fl.StringArrayVar(&o.Upstreams, "upstream", nil, "upstream revision PROJECT[=URL]@REF to check (repeatable), e.g. sglang@main")
	fl.StringVar(&o.Repo, "repo", "", "check this checkout (or, with --range, its history) instead of an upstream")
	fl.StringVar(&o.Range, "range", "", "walk the commits A..B (B defaults to the --upstream REF, or HEAD)")
	fl.StringVar(&o.Format, "format", "text", "report format: "+strings.Join(upstream.Formats, ", "))
	fl.BoolVar(&o.Strict, "strict", false, "count fuzzy matches as failures")
	fl.BoolVar(&o.JSON, "json", false, "same as --format json")
	return c
}

func runCheck(c *cobra.Command, g *Globals, o *checkOptions) error {
	if o.JSON {
		if c.Flags().Changed("format") && o.Format != "json" {
			return exit.With(exit.Usage, fmt.Errorf("check: --json and --format %s disagree; give one", o.Format))
		}
		o.Format = "json"
	}
	if !slices.Contains(upstream.Formats, o.Format) {
		return exit.With(exit.Usage, fmt.Errorf("check: unknown --format %q (want %s)", o.Format, strings.Join(upstream.Formats, ", ")))
	}
	var targets []upstream.Target
	for _, s := range o.Upstreams {
		t, err := upstream.ParseTarget(s)
		if err != nil {
			return exit.With(exit.Usage, fmt.Errorf("check: --upstream %w", err))
		}
		targets = append(targets, t)
	}
	if len(targets) > 0 && o.Repo != "" {
		return exit.With(exit.Usage, errors.New("check: give --upstream or --repo, not both"))
	}
	var rng [2]string
	if o.Range != "" {
		a, b, ok := strings.Cut(o.Range, "..")
		if !ok || a == "" || strings.HasPrefix(b, ".") {
			return exit.With(exit.Usage, fmt.Errorf("check: --range %q: want A..B (B may be omitted)", o.Range))
		}
		rng = [2]string{a, b}
	}
	cat, err := g.LoadCatalog()
	if err != nil {
		return err
	}
	ctx := c.Context()
	opts := upstream.Options{Strict: o.Strict}
	if IsTerminal(c.ErrOrStderr()) {
		opts.Progress = RawWriter(c.ErrOrStderr()) // counts only, with its own \r\033[K
	}
	rp := &upstream.Report{Strict: o.Strict, Verbose: g.Verbose}
	var firstErr error
	fail := func(p source.Project, ps []*patches.Patch, where string, err error) {
		if firstErr == nil {
			firstErr = err
		}
		for _, pt := range ps {
			rp.Results = append(rp.Results, upstream.Result{Project: p, Patch: pt.Name, Status: upstream.Error, Revision: where, Detail: err.Error(), Source: pt.File, SourceLine: 1})
		}
	}

	if len(targets) == 0 {
		dir := o.Repo
		if dir == "" {
			dir = os.Getenv("SMPATCH_REPO")
		}
		if dir == "" {
			dir = "."
		}
		if err := checkRepo(c, cat, dir, rng, opts, rp, fail); err != nil {
			return err
		}
	}
	var rc *gitrepo.RepoCache
	for _, t := range targets {
		ps := cat.ForProject(t.Project)
		if len(ps) == 0 {
			fmt.Fprintf(c.ErrOrStderr(), "smpatch: check: the catalog has no %s patches; nothing to check on %s\n", t.Project, t)
			continue
		}
		if rc == nil {
			if rc, err = openCache(c); err != nil {
				return fmt.Errorf("check: %w", err)
			}
		}
		u, err := rc.Open(ctx, t.URL)
		if err != nil {
			fail(t.Project, ps, t.URL+"@"+t.Ref, err)
			continue
		}
		rs, err := upstream.CheckUpstream(ctx, u, t, rng, ps, opts)
		if err != nil {
			where := t.URL
			if rng[0] == "" {
				where += "@" + t.Ref
			}
			fail(t.Project, ps, where, err)
			continue
		}
		rp.Results = append(rp.Results, rs...)
	}
	return finishCheck(c, o, rp, firstErr)
}

// checkRepo checks a local checkout, or with a range its git history.
func checkRepo(c *cobra.Command, cat *patches.Catalog, dir string, rng [2]string, opts upstream.Options, rp *upstream.Report,
	fail func(source.Project, []*patches.Patch, string, error)) error {
	ctx := c.Context()
	tree, err := source.OpenCheckout(dir)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	ps := cat.ForProject(tree.Project())
	if len(ps) == 0 {
		fmt.Fprintf(c.ErrOrStderr(), "smpatch: check: the catalog has no %s patches\n", tree.Project())
		return nil
	}
	rs, err, rerr := upstream.CheckCheckout(ctx, tree, rng, ps, opts)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if rerr != nil {
		fail(tree.Project(), ps, tree.Root(), rerr)
		return nil
	}
	rp.Results = append(rp.Results, rs...)
	return nil
}

// finishCheck prints the report and turns it into the exit code.
func finishCheck(c *cobra.Command, o *checkOptions, rp *upstream.Report, firstErr error) error {
	if err := rp.Write(c.OutOrStdout(), o.Format); err != nil {
		return err
	}
	if o.Format == "github" {
		if p := os.Getenv("GITHUB_STEP_SUMMARY"); p != "" {
			// A summary that cannot be written is a warning: the exit code
			// stays the check's own.
			if err := appendCheckSummary(p, rp); err != nil {
				fmt.Fprintf(c.ErrOrStderr(), "smpatch: warning: step summary: %v\n", err)
			}
		}
	}
	if firstErr != nil {
		n := rp.Counts()[upstream.Error]
		return fmt.Errorf("check: %d patch(es) could not be checked: %w", n, firstErr)
	}
	if rp.Failed() > 0 {
		return exit.Silent(exit.Conflict)
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

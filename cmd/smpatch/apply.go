package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/author"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// smpatch apply [NAME...]: plan the named patches (with no name, the
// series of the catalog directories) as one set and write it.

// applyOptions are apply's flags, streams and dependencies.
type applyOptions struct {
	IO      IOStreams
	Catalog func() (*patches.Catalog, error)
	Tree    func(ctx context.Context, repo string, project source.Project) (source.WritableTree, error)
	// Lock is how the command waits for the tree's journal lock, saying so on w.
	Lock func(w io.Writer) journal.Options
	// Detail and Info are the streams of --verbose and of progress lines
	// (nothing with --quiet); Color is where a diff goes in colour.
	Detail func(io.Writer) io.Writer
	Info   func(io.Writer) io.Writer
	Color  func(io.Writer) (io.Writer, painter)
	// Gate is the architecture gate of --check-arch.
	Gate func(ctx context.Context, w io.Writer, opts archGateOptions, ps []*patches.Patch) ([]string, error)
	// Verbose and Quiet are the global flags; Python the interpreter meant.
	Verbose, Quiet func() bool
	Python         func() string

	Names        []string
	Repo         string   // --repo: the tree to patch
	CheckArch    bool     // --check-arch: refuse unless every requirement is met
	ProbeFile    string   // --probe-file: with --check-arch, a saved probe report
	SM           string   // --sm: with --check-arch, the GPU architecture meant
	SitePackages []string // --site-packages: with --check-arch, directories to probe
	TP           int      // --tp: with --check-arch, the launch's tensor parallel size
	Force        bool     // --force: with --check-arch, warn instead of refusing
	DryRun       bool     // --dry-run: print the diff, write nothing
	Strict       bool     // --strict: fuzzy matches do not apply
	Variants     []string // --variant [PATCH=]NAME: the variant to use instead of choosing one
	JSON         bool     // --json
	Merge        bool     // --merge: on a conflict, write three-way conflict markers
	Reject       bool     // --reject: on a conflict, write the hunks that do not apply to FILE.rej
}

func (o *applyOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the tree to patch (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	f.BoolVar(&o.CheckArch, "check-arch", false, "refuse unless the probe shows every requirement of the patch is met")
	f.StringVar(&o.ProbeFile, "probe-file", "", "with --check-arch: read a saved probe report instead of probing")
	f.StringVar(&o.SM, "sm", "", "with --check-arch: the GPU architecture meant (MAJOR.MINOR), instead of the visible GPUs")
	f.StringArrayVar(&o.SitePackages, "site-packages", nil, "with --check-arch: site-packages directory to probe (repeatable)")
	f.IntVar(&o.TP, "tp", 0, "with --check-arch: the tensor parallel size the launch will run, for a patch that requires one")
	f.BoolVar(&o.DryRun, "dry-run", false, "print the unified diff that would be written; change nothing")
	f.BoolVar(&o.Strict, "strict", false, "count fuzzy matches as failures")
	f.StringArrayVar(&o.Variants, "variant", nil, "use this variant instead of choosing one: NAME (each named patch that has it) or PATCH=NAME (repeatable)")
	f.BoolVar(&o.Force, "warn-only", false, "with --check-arch: warn about an unmet requirement instead of refusing")
	HiddenAlias(c, "force", "warn-only")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
	f.BoolVar(&o.Merge, "merge", false, "on a conflict: apply the hunks that fit and write each other one as three-way conflict markers, to finish by hand (then smpatch refresh)")
	f.BoolVar(&o.Reject, "reject", false, "on a conflict: apply the hunks that fit and write the others to FILE.rej, to finish by hand (then smpatch refresh)")
	c.MarkFlagsMutuallyExclusive("merge", "reject", "dry-run")
}

// validate refuses the gate's flags without --check-arch: they would be
// ignored and the patch applied unchecked.
func (o *applyOptions) validate(c *cobra.Command) error {
	if o.CheckArch {
		if c.Flags().Changed("tp") && (o.TP < 1 || o.TP > 1024) {
			return withCode(exitUsage, fmt.Errorf("apply: --tp %d is not a tensor parallel size", o.TP))
		}
		return nil
	}
	for _, name := range []string{"probe-file", "sm", "site-packages", "warn-only", "force", "tp"} {
		if c.Flags().Changed(name) {
			return withCode(exitUsage, fmt.Errorf("apply: --%s needs --check-arch", name))
		}
	}
	return nil
}

func newApplyCmd(f *Factory) *cobra.Command {
	g := f.Globals
	o := &applyOptions{Catalog: f.Catalog, Tree: f.Tree, Lock: f.lockOptions, Detail: g.Detail, Info: g.Info, Color: g.colorTarget, Gate: checkArch,
		Verbose: func() bool { return g.Verbose }, Quiet: func() bool { return g.Quiet }, Python: g.PythonPath}
	c := &cobra.Command{
		Use:   "apply [NAME...]",
		Short: "Apply patches to a checkout or an installed package, journaled and all-or-nothing",
		Long: `Plan the named patches as one set on the tree, each on the result of those
before it (a patch after the patches it needs), and write them all or none.

With no NAME, apply the series of the --catalog directories: each
directory's series file (or its patches' order keys) in order, the
directories in the order given, with the patches they need from other
catalogs (built-in ones too) before them.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.validate(c); err != nil {
				return err
			}
			o.IO, o.Names = streams(c), args
			return runApply(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

// runApply plans the named patches as one set on the tree and hands it to
// patches.Apply, which recovers the journal, runs the gate, plans again if
// the tree changed meanwhile, and writes (or, with --dry-run, stops).
func runApply(ctx context.Context, o *applyOptions) error {
	w, errw := o.IO.Out, o.IO.ErrOut
	cat, err := o.Catalog()
	if err != nil {
		return err
	}
	ps, err := applySet(o, cat)
	if err != nil {
		return err
	}
	t, err := o.Tree(ctx, o.Repo, ps[0].Project)
	if err != nil {
		return err
	}
	variants, err := namedVariants(ps, o.Variants)
	if err != nil {
		return err
	}
	set, err := patches.PlanSet(ctx, t, ps, patches.SetOptions{Strict: o.Strict, Variants: variants})
	if err != nil {
		return stoppedBeforeWriting(ctx, err)
	}
	for _, pl := range set.Plans {
		fmt.Fprintf(o.Detail(errw), "plan of %s on %s:\n", pl.Patch.Name, t.Root())
		printPlan(o.Detail(errw), pl)
	}
	findings := []archFinding{}
	opts := patches.ApplyOptions{DryRun: o.DryRun, ToolVersion: Version, CatalogDigest: cat.Digest(), Waiting: waitingLine(errw), LockTimeout: o.Lock(errw).LockTimeout}
	if o.CheckArch {
		opts.Check = func(ctx context.Context, s *patches.Set) ([]string, error) {
			info := w
			if o.JSON {
				info = errw
			}
			sp := o.SitePackages
			if len(sp) == 0 && t.Kind() == source.KindSitePackages {
				// The flashinfer that matters is the one installed beside
				// the sglang being patched, not python3's.
				sp = []string{t.Root()}
			}
			if e := source.EditableOf(t); len(sp) == 0 && e != nil {
				// An editable install: its flashinfer is in the
				// site-packages that points at the checkout.
				sp = []string{e.SitePackages}
			}
			info, paint := o.Color(info)
			return o.Gate(ctx, info, archGateOptions{ProbeFile: o.ProbeFile, SM: o.SM, TP: o.TP, Force: o.Force, Quiet: o.Quiet(), Paint: paint, Python: o.Python(), SitePackages: sp, Findings: &findings,
				Tree: t, Changes: s.Changes()}, ps)
		}
	}
	res, err := patches.Apply(ctx, t, set, opts)
	for _, r := range res.Recovered {
		fmt.Fprintf(errw, "smpatch: %s\n", r)
	}
	for _, n := range res.Notices {
		fmt.Fprintf(errw, "smpatch: %s\n", n)
	}
	var ce *patches.ConflictError
	switch {
	case err != nil && codeOf(err) == exitRefused && o.JSON:
		out := applyRefusedJSON{Tree: t.Root(), Kind: string(t.Kind()), Refused: true, Error: err.Error(), Findings: findings, Patches: []*applyPatchJSON{}}
		for _, p := range ps {
			out.Patches = append(out.Patches, &applyPatchJSON{Name: p.Name, Status: "not-applied"})
		}
		_ = WriteJSON(w, out)
		return err
	case errors.As(err, &ce):
		if o.JSON {
			_ = WriteJSON(w, applyPlansJSON(t, ce.Set.Plans, false, "not-applied"))
		} else if oneLineProblem(ce.Problem.Plan) && !o.Verbose() {
			// The error line says it all: a needed patch, a verify rule, a
			// known uncovered shape (-v shows the plan and its conflicts).
		} else {
			fmt.Fprintf(w, "%s on %s:\n", ce.Problem.Plan.Patch.Name, ce.Problem.Tree)
			printPlan(w, ce.Problem.Plan)
			fmt.Fprint(w, patches.ConflictReport(ce.Problem.Plan))
		}
		if !o.JSON {
			return finishConflict(ctx, o, t, ce, err)
		}
		return err
	case err != nil:
		return err
	case o.DryRun && o.JSON:
		return WriteJSON(w, applyPlansJSON(t, res.Set.Plans, true, "would-apply"))
	case o.DryRun:
		printPlanned(o.Info(errw), res.Set)
		cw, paint := o.Color(w)
		_, _ = cw.Write(paint.diff(res.Set.UnifiedDiff()))
		fmt.Fprintln(o.Info(errw), "smpatch: dry run, nothing was written")
		return nil
	case o.JSON:
		return WriteJSON(w, res)
	}
	printApplied(ctx, w, t, res)
	return nil
}

// applySet is the set apply plans: the patches named, or with no name
// the catalog's series, said on the info stream.
func applySet(o *applyOptions, cat *patches.Catalog) ([]*patches.Patch, error) {
	if len(o.Names) > 0 {
		return cat.GetAll(o.Names)
	}
	ps, needed, err := cat.SeriesSet()
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("apply: %w", err))
	}
	info := o.Info(o.IO.ErrOut)
	for _, s := range cat.Series() {
		from := s.File
		if from == "" {
			from = s.Dir + " (order keys)"
		}
		var names []string
		for _, p := range s.Patches {
			names = append(names, p.Name)
		}
		fmt.Fprintf(info, "smpatch: series of %s: %s\n", from, strings.Join(names, ", "))
	}
	for _, p := range needed {
		var by []string
		for _, q := range ps {
			if slices.Contains(q.Needs, p.Name) {
				by = append(by, q.Name)
			}
		}
		fmt.Fprintf(info, "smpatch: with %s (%s), needed by %s\n", p.Name, p.Origin, strings.Join(by, ", "))
	}
	return ps, nil
}

// namedVariants reads --variant: PATCH=NAME names the variant of one of
// the patches named; NAME alone is the variant of each named patch that has
// one so called. A name no patch has is a usage error.
func namedVariants(ps []*patches.Patch, flags []string) (map[string]string, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	has := func(p *patches.Patch, name string) bool {
		for _, v := range p.Variants {
			if v.Name == name || (v.Versions != "" && v.Versions == name) {
				return true
			}
		}
		return false
	}
	list := func(p *patches.Patch) string {
		var names []string
		for _, v := range p.Variants {
			names = append(names, patches.VariantLabel(v))
		}
		return p.Name + ": " + strings.Join(names, ", ")
	}
	for _, f := range flags {
		patch, name, scoped := strings.Cut(f, "=")
		if !scoped {
			name, patch = patch, ""
		}
		if name == "" {
			return nil, withCode(exitUsage, fmt.Errorf("apply: --variant %q: name a variant (NAME or PATCH=NAME)", f))
		}
		found := false
		var lists []string
		for _, p := range ps {
			if patch != "" && p.Name != patch {
				continue
			}
			lists = append(lists, list(p))
			if has(p, name) {
				if prev, ok := out[p.Name]; ok && prev != name {
					return nil, withCode(exitUsage, fmt.Errorf("apply: --variant: two variants named for %s (%s and %s)", p.Name, prev, name))
				}
				out[p.Name], found = name, true
			}
		}
		switch {
		case patch != "" && len(lists) == 0:
			return nil, withCode(exitUsage, fmt.Errorf("apply: --variant %s: %s is not one of the patches named", f, patch))
		case !found:
			return nil, withCode(exitUsage, fmt.Errorf("apply: --variant %s: no patch named has a variant %q (%s)", f, name, strings.Join(lists, "; ")))
		}
	}
	return out, nil
}

// printPlanned says, for a dry run, what each patch of the set would do:
// its variant and why, and every hunk's state (one already there, by this
// patch or by an equivalent change, is reported as such).
func printPlanned(w io.Writer, s *patches.Set) {
	for _, pl := range s.Plans {
		if pl.Outcome() == patches.OutcomeAlreadyApplied {
			why := "already applied: the tree already has every change"
			if pl.Retired != "" {
				why = "already upstream: " + pl.Retired
			}
			fmt.Fprintf(w, "%s: %s\n", pl.Patch.Name, why)
			continue
		}
		fmt.Fprintf(w, "%s: would apply (variant %s", pl.Patch.Name, patches.VariantLabel(pl.Variant))
		if pl.VariantReason != "" {
			fmt.Fprintf(w, ": %s", pl.VariantReason)
		}
		fmt.Fprintln(w, ")")
		for _, f := range pl.Files {
			var hs []string
			for _, h := range f.Hunks {
				hs = append(hs, fmt.Sprintf("#%d %s", h.Index+1, hunkWords(h)))
			}
			fmt.Fprintf(w, "  %s: %s\n", pl.Shown(f.Path), strings.Join(hs, "; "))
		}
	}
	var hunks []patches.HunkResult
	for _, pl := range s.Plans {
		for _, f := range pl.Files {
			hunks = append(hunks, f.Hunks...)
		}
	}
	printHunkLegend(w, hunks)
}

// printHunkLegend explains, once, the words of the hunk lines above that
// need it: an offset (where the hunk was found against where its diff
// says) and a fuzzy match.
func printHunkLegend(w io.Writer, hunks []patches.HunkResult) {
	var offset, fuzzy *patches.HunkResult
	for i := range hunks {
		switch h := &hunks[i]; {
		case h.Status == patches.Offset && offset == nil:
			offset = h
		case h.Status == patches.Fuzzy && fuzzy == nil:
			fuzzy = h
		}
	}
	if offset != nil {
		dir, n := "below", offset.Offset
		if n < 0 {
			dir, n = "above", -n
		}
		fmt.Fprintf(w, "  (#N numbers a diff's hunks; offset %+d: the hunk's lines were found exactly, %d line(s) %s where its diff places them: the file moved since the diff was made)\n", offset.Offset, n, dir)
	}
	if fuzzy != nil {
		fmt.Fprintf(w, "  (fuzzy: the hunk's context lines differ from the diff's; similarity %.2f of 1, the lines it changes match)\n", fuzzy.Score)
	}
}

// printApplied prints what an apply wrote, patch by patch and file by file.
func printApplied(ctx context.Context, w io.Writer, t source.Tree, res *patches.ApplyResult) {
	fmt.Fprintf(w, "tree: %s\n", patches.TreeLine(ctx, t))
	for _, po := range res.Patches {
		if po.Status == "already-applied" {
			fmt.Fprintf(w, "%s: %s\n", po.Name, po.Reason)
			continue
		}
		fmt.Fprintf(w, "%s: applied (variant %s", po.Name, po.Variant)
		if po.VariantReason != "" {
			fmt.Fprintf(w, ": %s", po.VariantReason)
		}
		fmt.Fprintln(w, ")")
		for _, f := range po.Files {
			var hs []string
			for _, h := range f.Hunks {
				hs = append(hs, fmt.Sprintf("#%d %s", h.Index+1, hunkWords(h)))
			}
			fmt.Fprintf(w, "  %s: %s\n", source.ShownPath(t, f.Path), strings.Join(hs, "; "))
			if f.Note != "" {
				fmt.Fprintf(w, "    %s\n", f.Note)
			}
			for _, pyc := range f.PycRemoved {
				fmt.Fprintf(w, "    removed stale bytecode %s\n", source.ShownPath(t, pyc))
			}
		}
	}
	var hunks []patches.HunkResult
	for _, po := range res.Patches {
		for _, f := range po.Files {
			hunks = append(hunks, f.Hunks...)
		}
	}
	printHunkLegend(w, hunks)
}

// applyJSON is apply's --json document when nothing is written (a dry
// run, or a plan that does not resolve). It has the keys of the document
// an apply that writes prints (patches.ApplyResult), and each patch adds
// its plan's attempts and, when it resolves, its diff.
type applyJSON struct {
	Tree    string            `json:"tree"`
	Kind    string            `json:"kind"`
	DryRun  bool              `json:"dry_run,omitempty"`
	Patches []*applyPatchJSON `json:"patches"`
}

// applyRefusedJSON is apply's --json document when --check-arch refuses:
// every requirement checked, and each patch not applied.
type applyRefusedJSON struct {
	Tree     string            `json:"tree"`
	Kind     string            `json:"kind"`
	Refused  bool              `json:"refused"`
	Error    string            `json:"error"`
	Findings []archFinding     `json:"findings"`
	Patches  []*applyPatchJSON `json:"patches"`
}

type applyPatchJSON struct {
	Name   string `json:"name"`
	Status string `json:"status"` // would-apply | already-applied | not-applied
	*planJSON
}

func applyPlansJSON(t source.Tree, plans []*patches.Plan, dryRun bool, status string) *applyJSON {
	out := &applyJSON{Tree: t.Root(), Kind: string(t.Kind()), DryRun: dryRun, Patches: []*applyPatchJSON{}}
	for _, pl := range plans {
		st := status
		if pl.Outcome() == patches.OutcomeAlreadyApplied {
			st = "already-applied"
		}
		out.Patches = append(out.Patches, &applyPatchJSON{Name: pl.Patch.Name, Status: st, planJSON: planToJSON(pl)})
	}
	return out
}

// finishConflict leaves a conflicting patch for the user to finish, with
// --merge or --reject, or says how; the exit code stays the conflict's.
func finishConflict(ctx context.Context, o *applyOptions, t source.WritableTree, ce *patches.ConflictError, err error) error {
	pl := ce.Problem.Plan
	if pl == nil || pl.Outcome() != patches.OutcomeConflict {
		return err
	}
	name := pl.Patch.Name
	if !o.Merge && !o.Reject {
		fmt.Fprintf(o.IO.ErrOut, "smpatch: to finish %s by hand: smpatch apply %s --merge (conflict markers) or --reject (.rej files), edit, then smpatch refresh %s\n", name, name, name)
		return err
	}
	mode := author.Merge
	if o.Reject {
		mode = author.Reject
	}
	fin, ferr := author.Finish(ctx, t, pl, author.FinishOptions{Mode: mode, ToolVersion: Version, Waiting: waitingLine(o.IO.ErrOut)})
	if ferr != nil {
		return ferr
	}
	for _, f := range fin.Files {
		fmt.Fprintf(o.IO.Out, "%s: %s\n", name, f)
	}
	for _, r := range fin.Rejects {
		fmt.Fprintf(o.IO.Out, "%s: rejected hunks in %s\n", name, r)
	}
	fmt.Fprintf(o.IO.Out, "%s: finish the edit, then `smpatch refresh %s --repo %s` records it as a variant for this tree; `smpatch revert %s` puts back the bytes before (the journal has them)\n", name, name, t.Root(), name)
	return silentCode(exitConflict)
}

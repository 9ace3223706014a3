package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
)

// list, show, apply, revert and status: the patch engine's commands.

func init() {
	registerCommand(newListCmd)
	registerCommand(newShowCmd)
	registerCommand(newApplyCmd)
	registerCommand(newRevertCmd)
	registerCommand(newStatusCmd)
}

// engLightGC makes the engine's commands collect garbage rarely: they hold
// a few files of at most some MB for some milliseconds, and at that scale
// collections (several, while the heap first grows) cost more time than
// the memory they give back is worth. An explicit $GOGC is left alone.
func engLightGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

func engLoadCatalog(g *globalOptions) (*patches.Catalog, error) {
	return patches.LoadCatalog(g.CatalogDirs())
}

func engJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // ">= 0.5.8" as written, not "\u003e= 0.5.8"
	return enc.Encode(v)
}

// engResolve finds the tree for a command (--repo, $SMPATCH_REPO, the
// current directory, the installed package).
func engResolve(ctx context.Context, g *globalOptions, repo string, project source.Project) (source.WritableTree, error) {
	return source.Resolve(ctx, repo, project, g.PythonPath())
}

func engTreeLine(ctx context.Context, t source.Tree) string {
	v, from, err := t.Version(ctx)
	ver := "version unknown"
	switch {
	case err != nil:
		ver = "version unknown: " + err.Error()
	case v != nil:
		ver = fmt.Sprintf("version %s from %s", source.VersionString(v), from)
	case from != "":
		ver = "version " + from
	}
	return fmt.Sprintf("%s (%s of %s, %s)", t.Root(), t.Kind(), t.Project(), ver)
}

// ---- list ----

type listPatchJSON struct {
	Name      string        `json:"name"`
	Project   string        `json:"project"`
	Summary   string        `json:"summary"`
	Origin    string        `json:"origin"`
	File      string        `json:"file"`
	Upstream  string        `json:"upstream_status"`
	Variants  []variantJSON `json:"variants"`
	Uncovered []string      `json:"uncovered"`
	Digest    string        `json:"digest"`
}

type variantJSON struct {
	Name     string   `json:"name"`
	Versions string   `json:"versions"`
	Diffs    []string `json:"diffs"`
	Files    []string `json:"files"`
	Search   []string `json:"search"`
}

func variantsJSON(p *patches.Patch) []variantJSON {
	out := []variantJSON{}
	for _, v := range p.Variants {
		vj := variantJSON{Name: v.Name, Versions: v.Versions, Diffs: orEmpty(v.Diffs), Search: orEmpty(v.Search), Files: []string{}}
		for _, fd := range v.Files {
			vj.Files = append(vj.Files, fd.Path())
		}
		out = append(out, vj)
	}
	return out
}

func newListCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List the patches of the catalog (built-in and --catalog directories)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cat, err := engLoadCatalog(g)
			if err != nil {
				return err
			}
			w := c.OutOrStdout()
			if asJSON {
				out := struct {
					CatalogDigest string          `json:"catalog_digest"`
					Patches       []listPatchJSON `json:"patches"`
				}{cat.Digest(), []listPatchJSON{}}
				for _, p := range cat.All() {
					out.Patches = append(out.Patches, listPatchJSON{
						Name: p.Name, Project: string(p.Project), Summary: p.Summary, Origin: p.Origin,
						File: p.File, Upstream: p.Upstream.Status, Variants: variantsJSON(p), Uncovered: orEmpty(p.Uncovered), Digest: p.Digest,
					})
				}
				return engJSON(w, out)
			}
			if len(cat.All()) == 0 {
				fmt.Fprintln(w, "no patches in the catalog")
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPROJECT\tVARIANTS\tORIGIN\tSUMMARY")
			for _, p := range cat.All() {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", p.Name, p.Project, len(p.Variants), p.Origin, p.Summary)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// ---- show ----

type requiresJSON struct {
	GPUSMMajor       []int             `json:"gpu_sm_major"`
	FlashInferModule string            `json:"flashinfer_module"`
	CUDAMin          string            `json:"cuda_min"`
	P2PAll           bool              `json:"p2p_all"`
	Packages         map[string]string `json:"packages"`
}

type verifyJSON struct {
	File        string `json:"file"`
	Contains    string `json:"contains"`
	NotContains string `json:"not_contains"`
}

type upstreamJSON struct {
	Status     string `json:"status"`
	PR         string `json:"pr"`
	MergedIn   string `json:"merged_in"`
	Marker     string `json:"marker"`
	MarkerFile string `json:"marker_file"`
}

type planJSON struct {
	Variant       string                 `json:"variant"`
	VariantReason string                 `json:"variant_reason"`
	Version       string                 `json:"version"`
	VersionFrom   string                 `json:"version_from"`
	Outcome       string                 `json:"outcome"`
	Reason        string                 `json:"reason"`
	Attempts      []patches.Attempt      `json:"attempts"`
	Files         []*patches.FileOutcome `json:"files"`
	Diff          string                 `json:"diff"`
}

func planToJSON(pl *patches.Plan) *planJSON {
	pj := &planJSON{
		Variant: patches.VariantLabel(pl.Variant), VariantReason: pl.VariantReason, Version: pl.Version,
		VersionFrom: pl.VersionFrom, Outcome: string(pl.Outcome()), Reason: pl.Reason, Attempts: pl.Attempts,
		Files: []*patches.FileOutcome{},
	}
	if pj.Attempts == nil {
		pj.Attempts = []patches.Attempt{}
	}
	for _, fp := range pl.Files {
		hunks := fp.Hunks
		if hunks == nil {
			hunks = []patches.HunkResult{}
		}
		pj.Files = append(pj.Files, &patches.FileOutcome{Path: fp.Path, Note: fp.Note, Hunks: hunks, PycRemoved: []string{}})
	}
	if pl.OK(false) {
		pj.Diff = string(pl.UnifiedDiff())
	}
	return pj
}

func newShowCmd(g *globalOptions) *cobra.Command {
	var (
		repo   string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a patch: metadata, requirements, variants, and the diff it would make on a tree",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			engLightGC()
			ctx := c.Context()
			cat, err := engLoadCatalog(g)
			if err != nil {
				return err
			}
			p, err := cat.Get(args[0])
			if err != nil {
				return err
			}
			// A tree is optional for show: an explicit --repo must work,
			// otherwise look quietly.
			var (
				t       source.WritableTree
				treeErr error
				plan    *patches.Plan
			)
			t, treeErr = engResolve(ctx, g, repo, p.Project)
			if treeErr != nil && (repo != "") {
				return treeErr
			}
			if t != nil {
				recovered, err := patches.Recover(ctx, t)
				for _, r := range recovered {
					fmt.Fprintf(c.ErrOrStderr(), "smpatch: %s\n", r)
				}
				if err != nil {
					return err
				}
				if plan, err = patches.NewPlan(ctx, p, t, patches.PlanOptions{}); err != nil {
					return err
				}
			}
			w := c.OutOrStdout()
			if asJSON {
				out := struct {
					Name      string        `json:"name"`
					Project   string        `json:"project"`
					Summary   string        `json:"summary"`
					Links     []string      `json:"links"`
					Origin    string        `json:"origin"`
					File      string        `json:"file"`
					Overrides bool          `json:"overrides"`
					Requires  requiresJSON  `json:"requires"`
					Upstream  upstreamJSON  `json:"upstream"`
					Variants  []variantJSON `json:"variants"`
					Verify    []verifyJSON  `json:"verify"`
					Uncovered []string      `json:"uncovered"`
					Digest    string        `json:"digest"`
					Tree      *treeJSON     `json:"tree"`
					TreeError string        `json:"tree_error,omitempty"`
					Plan      *planJSON     `json:"plan"`
					// UpstreamMarker is where the tree shows the change is
					// upstream ([upstream] marker), or "".
					UpstreamMarker string `json:"upstream_marker"`
				}{
					Name: p.Name, Project: string(p.Project), Summary: p.Summary, Links: orEmpty(p.Links), Origin: p.Origin,
					File: p.File, Overrides: p.Overrides,
					Requires: requiresJSON{orEmptyInts(p.Requires.GPUSMMajor), p.Requires.FlashInferModule, p.Requires.CUDAMin, p.Requires.P2PAll, orEmptyMap(p.Requires.Packages)},
					Upstream: upstreamJSON{p.Upstream.Status, p.Upstream.PR, p.Upstream.MergedIn, p.Upstream.Marker, p.Upstream.MarkerFile},
					Variants: variantsJSON(p), Verify: []verifyJSON{}, Uncovered: orEmpty(p.Uncovered), Digest: p.Digest,
				}
				for _, v := range p.Verify {
					out.Verify = append(out.Verify, verifyJSON{v.File, v.Contains, v.NotContains})
				}
				if t != nil {
					out.Tree = engTreeJSON(ctx, t)
					out.Plan = planToJSON(plan)
					if ok, where := patches.UpstreamMarker(t, p); ok {
						out.UpstreamMarker = where
					}
				} else if treeErr != nil {
					out.TreeError = treeErr.Error()
				}
				return engJSON(w, out)
			}
			fmt.Fprintf(w, "%s  (%s; %s: %s)\n", p.Name, p.Project, p.Origin, p.File)
			if p.Summary != "" {
				fmt.Fprintf(w, "  %s\n", p.Summary)
			}
			if p.Overrides {
				fmt.Fprintln(w, "  overrides the built-in patch of the same name")
			}
			for _, l := range p.Links {
				fmt.Fprintf(w, "  link: %s\n", l)
			}
			if u := p.Upstream; u != (patches.Upstream{}) {
				fmt.Fprintln(w, "upstream:")
				for _, kv := range [][2]string{{"status", u.Status}, {"pr", u.PR}, {"merged_in", u.MergedIn}, {"marker", u.Marker}, {"marker_file", u.MarkerFile}} {
					if kv[1] != "" {
						fmt.Fprintf(w, "  %s: %s\n", kv[0], kv[1])
					}
				}
			}
			fmt.Fprintln(w, "requires:")
			r := p.Requires
			if r.Empty() {
				fmt.Fprintln(w, "  nothing")
			}
			if len(r.GPUSMMajor) > 0 {
				var ms []string
				for _, m := range r.GPUSMMajor {
					ms = append(ms, fmt.Sprint(m))
				}
				fmt.Fprintf(w, "  gpu_sm_major: %s\n", strings.Join(ms, ", "))
			}
			if r.FlashInferModule != "" {
				fmt.Fprintf(w, "  flashinfer_module: %s\n", r.FlashInferModule)
			}
			if r.CUDAMin != "" {
				fmt.Fprintf(w, "  cuda_min: %s\n", r.CUDAMin)
			}
			if r.P2PAll {
				fmt.Fprintln(w, "  p2p_all: true")
			}
			var pk []string
			for k := range r.Packages {
				pk = append(pk, k)
			}
			sort.Strings(pk)
			for _, k := range pk {
				fmt.Fprintf(w, "  package %s %s\n", k, r.Packages[k])
			}
			fmt.Fprintln(w, "variants:")
			for _, v := range p.Variants {
				vr := v.Versions
				if vr == "" {
					vr = "any version"
				}
				fmt.Fprintf(w, "  %s: %s\n", v.Name, vr)
				for _, fd := range v.Files {
					fmt.Fprintf(w, "    %s (%d hunks)\n", fd.Path(), len(fd.Hunks))
				}
				if len(v.Search) > 0 {
					fmt.Fprintf(w, "    search: %s\n", strings.Join(v.Search, ", "))
				}
			}
			if len(p.Verify) > 0 {
				fmt.Fprintln(w, "verify:")
				for _, v := range p.Verify {
					if v.Contains != "" {
						fmt.Fprintf(w, "  %s contains %q\n", v.File, v.Contains)
					}
					if v.NotContains != "" {
						fmt.Fprintf(w, "  %s does not contain %q\n", v.File, v.NotContains)
					}
				}
			}
			if len(p.Uncovered) > 0 {
				fmt.Fprintln(w, "uncovered shapes:")
				for _, u := range p.Uncovered {
					fmt.Fprintf(w, "  %s\n", u)
				}
			}
			if t == nil {
				fmt.Fprintf(w, "tree: none found (%v)\n", treeErr)
				return nil
			}
			fmt.Fprintf(w, "tree: %s\n", engTreeLine(ctx, t))
			applied := false
			if st, err := patches.ReadState(ctx, t); err == nil {
				if e := st.Get(p.Name); e != nil {
					applied = true
					fmt.Fprintf(w, "applied: yes, variant %s, %s\n", e.Variant, e.AppliedAt.Format("2006-01-02 15:04:05Z07:00"))
				}
			}
			if ok, where := patches.UpstreamMarker(t, p); ok && !applied {
				fmt.Fprintf(w, "upstream: the tree already has the upstream change (marker %q at %s)\n", p.Upstream.Marker, where)
			}
			engPrintPlan(w, plan)
			if plan.OK(false) && plan.Outcome() != patches.OutcomeAlreadyApplied {
				fmt.Fprintln(w, "diff it would make:")
				_, _ = w.Write(plan.UnifiedDiff())
			}
			return nil
		},
	}
	c.Flags().StringVar(&repo, "repo", "", "the tree to show the diff for (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func orEmptyInts(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type treeJSON struct {
	Root        string `json:"root"`
	Kind        string `json:"kind"`
	Project     string `json:"project"`
	Version     string `json:"version,omitempty"`
	VersionFrom string `json:"version_from"`
}

func engTreeJSON(ctx context.Context, t source.Tree) *treeJSON {
	tj := &treeJSON{Root: t.Root(), Kind: string(t.Kind()), Project: string(t.Project())}
	v, from, err := t.Version(ctx)
	if err != nil {
		tj.VersionFrom = "unknown: " + err.Error()
	} else {
		if v != nil {
			tj.Version = source.VersionString(v)
		}
		tj.VersionFrom = from
	}
	return tj
}

// engPrintPlan prints the variant chosen and every hunk's status.
func engPrintPlan(w io.Writer, pl *patches.Plan) {
	if pl.Variant != nil {
		fmt.Fprintf(w, "variant: %s", patches.VariantLabel(pl.Variant))
		if pl.VariantReason != "" {
			fmt.Fprintf(w, " (%s)", pl.VariantReason)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "outcome: %s", pl.Outcome())
	if pl.Reason != "" && !pl.OK(false) {
		fmt.Fprintf(w, ": %s", pl.Reason)
	}
	fmt.Fprintln(w)
	if tried := pl.Tried(); tried != nil {
		for _, a := range tried {
			fmt.Fprintf(w, "  tried variant %s: %s", a.Variant, a.Outcome)
			if a.Reason != "" {
				fmt.Fprintf(w, ": %s", a.Reason)
			}
			fmt.Fprintln(w)
		}
	}
	for _, fp := range pl.Files {
		fmt.Fprintf(w, "  %s\n", fp.Path)
		if fp.Note != "" {
			fmt.Fprintf(w, "    %s\n", fp.Note)
		}
		for _, h := range fp.Hunks {
			fmt.Fprintf(w, "    hunk #%d: %s", h.Index+1, engHunkWords(h))
			fmt.Fprintln(w)
		}
	}
}

func engHunkWords(h patches.HunkResult) string {
	switch h.Status {
	case patches.Exact:
		return fmt.Sprintf("exact at line %d", h.Line)
	case patches.Offset:
		return fmt.Sprintf("offset %+d (line %d)", h.Offset, h.Line)
	case patches.Fuzzy:
		return fmt.Sprintf("fuzzy at line %d (similarity %.2f)", h.Line, h.Score)
	case patches.AlreadyApplied:
		return fmt.Sprintf("already applied at line %d", h.Line)
	case patches.Conflict:
		s := "conflict"
		if h.Reason != "" {
			s += ": " + h.Reason
		}
		return s
	}
	return h.Status.String()
}

// ---- apply ----

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

func newApplyCmd(g *globalOptions) *cobra.Command {
	var (
		repo                          string
		checkArchFlag, dryRun, strict bool
		force, asJSON                 bool
		probeFile, sm                 string
		sitePackages                  []string
	)
	c := &cobra.Command{
		Use:   "apply NAME...",
		Short: "Apply patches to a checkout or an installed package, journaled and all-or-nothing",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			engLightGC()
			ctx := c.Context()
			w := c.OutOrStdout()
			if !checkArchFlag {
				// These only mean something to the gate: without it they
				// would be ignored and the patch applied unchecked.
				for _, name := range []string{"probe-file", "sm", "site-packages", "force"} {
					if c.Flags().Changed(name) {
						return exit.With(exit.Usage, fmt.Errorf("apply: --%s needs --check-arch", name))
					}
				}
			}
			info := w
			if asJSON {
				info = c.ErrOrStderr()
			}
			cat, err := engLoadCatalog(g)
			if err != nil {
				return err
			}
			var ps []*patches.Patch
			seen := map[string]bool{}
			for _, n := range args {
				p, err := cat.Get(n)
				if err != nil {
					return err
				}
				if !seen[p.Name] {
					seen[p.Name] = true
					ps = append(ps, p)
				}
			}
			project := ps[0].Project
			for _, p := range ps[1:] {
				if p.Project != project {
					return fmt.Errorf("%s is a %s patch and %s a %s patch: apply them separately", ps[0].Name, project, p.Name, p.Project)
				}
			}
			t, err := engResolve(ctx, g, repo, project)
			if err != nil {
				return err
			}
			// An interrupted apply is rolled back before anything else,
			// even when the gate then refuses.
			recovered, err := patches.Recover(ctx, t)
			for _, r := range recovered {
				fmt.Fprintf(c.ErrOrStderr(), "smpatch: %s\n", r)
			}
			if err != nil {
				return err
			}
			var notes []string
			if checkArchFlag {
				if len(sitePackages) == 0 && t.Kind() == source.KindSitePackages {
					// The flashinfer that matters is the one installed
					// beside the sglang being patched, not python3's.
					sitePackages = []string{t.Root()}
				}
				findings := []archFinding{}
				notes, err = checkArch(ctx, info, archGateOptions{ProbeFile: probeFile, SM: sm, Force: force, Python: g.PythonPath(), SitePackages: sitePackages, Findings: &findings}, ps)
				if err != nil {
					if asJSON && exit.Code(err) == exit.Refused {
						out := applyRefusedJSON{Tree: t.Root(), Kind: string(t.Kind()), Refused: true, Error: err.Error(), Findings: findings, Patches: []*applyPatchJSON{}}
						for _, p := range ps {
							out.Patches = append(out.Patches, &applyPatchJSON{Name: p.Name, Status: "not-applied"})
						}
						_ = engJSON(w, out)
					}
					return err
				}
			}
			var plans []*patches.Plan
			for _, p := range ps {
				pl, err := patches.NewPlan(ctx, p, t, patches.PlanOptions{Strict: strict})
				if err != nil {
					return err
				}
				plans = append(plans, pl)
			}
			// Nothing is written unless every plan resolves.
			for _, pl := range plans {
				if pl.OK(strict) {
					continue
				}
				if asJSON {
					_ = engJSON(w, applyPlansJSON(t, plans, false, "not-applied"))
				} else {
					fmt.Fprintf(w, "%s: does not apply to %s\n", pl.Patch.Name, engTreeLine(ctx, t))
					engPrintPlan(w, pl)
					fmt.Fprint(w, patches.ConflictReport(pl))
				}
				why := pl.Reason
				if why == "" {
					why = string(pl.Outcome())
				}
				if ok, where := patches.UpstreamMarker(t, pl.Patch); ok {
					why += fmt.Sprintf(" (the tree already has the upstream change: marker at %s)", where)
				}
				if pl.Outcome() == patches.OutcomeFuzzy && strict {
					why = "a hunk only matches fuzzily and --strict is set"
				}
				return exit.With(exit.Conflict, fmt.Errorf("%s does not apply: %s; nothing was changed", pl.Patch.Name, why))
			}
			if dryRun {
				if asJSON {
					return engJSON(w, applyPlansJSON(t, plans, true, "would-apply"))
				}
				for _, pl := range plans {
					_, _ = w.Write(pl.UnifiedDiff())
				}
				fmt.Fprintln(c.ErrOrStderr(), "smpatch: dry run, nothing was written")
				return nil
			}
			res, err := patches.Apply(ctx, t, plans, patches.ApplyOptions{
				Strict: strict, Notes: notes, ToolVersion: version, CatalogDigest: cat.Digest(),
			})
			if res != nil {
				for _, r := range res.Recovered {
					fmt.Fprintf(c.ErrOrStderr(), "smpatch: %s\n", r)
				}
				for _, n := range res.Notices {
					fmt.Fprintf(c.ErrOrStderr(), "smpatch: %s\n", n)
				}
			}
			if err != nil {
				var ce *patches.ConflictError
				if errors.As(err, &ce) {
					// A plan made again under the lock (over an earlier
					// patch of this call, or a tree that changed) conflicts.
					if asJSON {
						shown := make([]*patches.Plan, len(plans))
						for i, pl := range plans {
							shown[i] = pl
							if pl.Patch.Name == ce.Plan.Patch.Name {
								shown[i] = ce.Plan
							}
						}
						_ = engJSON(w, applyPlansJSON(t, shown, false, "not-applied"))
					} else {
						fmt.Fprintf(w, "%s: does not apply to %s\n", ce.Plan.Patch.Name, engTreeLine(ctx, t))
						engPrintPlan(w, ce.Plan)
						fmt.Fprint(w, patches.ConflictReport(ce.Plan))
					}
				}
				return err
			}
			if asJSON {
				return engJSON(w, res)
			}
			fmt.Fprintf(w, "tree: %s\n", engTreeLine(ctx, t))
			for _, po := range res.Patches {
				switch po.Status {
				case "already-applied":
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
						hs = append(hs, fmt.Sprintf("#%d %s", h.Index+1, engHunkWords(h)))
					}
					fmt.Fprintf(w, "  %s: %s\n", f.Path, strings.Join(hs, "; "))
					if f.Note != "" {
						fmt.Fprintf(w, "    %s\n", f.Note)
					}
					for _, pyc := range f.PycRemoved {
						fmt.Fprintf(w, "    removed stale bytecode %s\n", pyc)
					}
				}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&repo, "repo", "", "the tree to patch (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	f.BoolVar(&checkArchFlag, "check-arch", false, "refuse unless the probe shows every requirement of the patch is met")
	f.StringVar(&probeFile, "probe-file", "", "with --check-arch: read a saved probe report instead of probing")
	f.StringVar(&sm, "sm", "", "with --check-arch: the GPU architecture meant (MAJOR.MINOR), instead of the visible GPUs")
	f.StringArrayVar(&sitePackages, "site-packages", nil, "with --check-arch: site-packages directory to probe (repeatable)")
	f.BoolVar(&dryRun, "dry-run", false, "print the unified diff that would be written; change nothing")
	f.BoolVar(&strict, "strict", false, "count fuzzy matches as failures")
	f.BoolVar(&force, "force", false, "with --check-arch: warn about an unmet requirement instead of refusing")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// ---- revert ----

func newRevertCmd(g *globalOptions) *cobra.Command {
	var (
		repo          string
		force, asJSON bool
	)
	c := &cobra.Command{
		Use:   "revert [NAME...]",
		Short: "Restore the original bytes of applied patches (every applied patch when no NAME)",
		RunE: func(c *cobra.Command, args []string) error {
			engLightGC()
			ctx := c.Context()
			w := c.OutOrStdout()
			// The journal has all a revert needs: the catalog serves names
			// (their project, the did-you-mean) and warns about a broken
			// --catalog directory. With neither, the built-in catalog alone
			// has nothing to add, so it is not loaded. A broken catalog
			// only costs the did-you-mean.
			var cat *patches.Catalog
			if len(args) > 0 || len(g.CatalogDirs()) > 0 {
				var err error
				if cat, err = engLoadCatalog(g); err != nil {
					fmt.Fprintf(c.ErrOrStderr(), "smpatch: warning: %v\n", err)
					cat = nil
				}
			}
			var project source.Project
			if len(args) > 0 && cat != nil {
				if p, err := cat.Get(args[0]); err == nil {
					project = p.Project
				}
			}
			t, err := engResolve(ctx, g, repo, project)
			if err != nil {
				return err
			}
			res, err := patches.Revert(ctx, t, cat, args, patches.RevertOptions{Force: force})
			if res != nil {
				for _, r := range res.Recovered {
					fmt.Fprintf(c.ErrOrStderr(), "smpatch: %s\n", r)
				}
			}
			var de *patches.DriftError
			if err != nil && !errors.As(err, &de) {
				return err
			}
			if asJSON {
				if jerr := engJSON(w, res); jerr != nil {
					return jerr
				}
				return err
			}
			if de != nil {
				for _, po := range res.Patches {
					for _, f := range po.Files {
						if f.State == "changed" {
							fmt.Fprintf(w, "%s: %s changed since it was applied:\n", po.Name, f.Path)
							fmt.Fprint(w, f.Diff)
						}
					}
				}
				return err
			}
			for _, n := range res.NotApplied {
				fmt.Fprintf(w, "%s: not applied, nothing to revert\n", n)
			}
			if len(res.Patches) == 0 && len(res.NotApplied) == 0 {
				fmt.Fprintf(w, "nothing to revert in %s\n", t.Root())
			}
			for _, po := range res.Patches {
				fmt.Fprintf(w, "%s: reverted\n", po.Name)
				for _, f := range po.Files {
					switch f.State {
					case "restored":
						fmt.Fprintf(w, "  %s: original restored\n", f.Path)
					case "already-original":
						fmt.Fprintf(w, "  %s: already original\n", f.Path)
					case "forced":
						fmt.Fprintf(w, "  %s: patch hunks reverse-applied, other edits kept\n", f.Path)
					}
					for _, pyc := range f.PycRemoved {
						fmt.Fprintf(w, "    removed stale bytecode %s\n", pyc)
					}
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&repo, "repo", "", "the patched tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	c.Flags().BoolVar(&force, "force", false, "for files changed since apply: reverse-apply only the patch's hunks, keeping other edits")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// ---- status ----

func newStatusCmd(g *globalOptions) *cobra.Command {
	var (
		repo   string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the patches applied to a tree and whether their files changed since",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			engLightGC()
			ctx := c.Context()
			w := c.OutOrStdout()
			cat, err := engLoadCatalog(g)
			if err != nil {
				fmt.Fprintf(c.ErrOrStderr(), "smpatch: warning: %v\n", err)
				cat = nil
			}
			t, err := engResolve(ctx, g, repo, "")
			if err != nil {
				return err
			}
			res, err := patches.Status(ctx, t, cat)
			if err != nil {
				return err
			}
			for _, r := range res.Recovered {
				fmt.Fprintf(c.ErrOrStderr(), "smpatch: %s\n", r)
			}
			if asJSON {
				return engJSON(w, res)
			}
			fmt.Fprintf(w, "tree: %s\n", engTreeLine(ctx, t))
			if len(res.Patches) == 0 {
				fmt.Fprintln(w, "no patches applied")
				return nil
			}
			for _, ps := range res.Patches {
				state := "clean"
				if !ps.Clean {
					state = "changed since apply"
				}
				fmt.Fprintf(w, "%s: applied %s, variant %s, %s\n", ps.Name, ps.AppliedAt.Format("2006-01-02 15:04:05Z07:00"), ps.Variant, state)
				if ps.CatalogChanged {
					fmt.Fprintln(w, "  the catalog's patch differs from the one applied")
				}
				for _, n := range ps.Notes {
					fmt.Fprintf(w, "  note: %s\n", n)
				}
				for _, f := range ps.Files {
					fmt.Fprintf(w, "  %s: %s\n", f.Path, f.State)
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&repo, "repo", "", "the tree (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/requires"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// smpatch show NAME: a patch's metadata and the diff it would make.

// joinInts is "2, 4".
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// requiresJSON is r with empty lists and maps for --json ([] and {}, not
// null).
func requiresJSON(r requires.Set) requires.Set {
	r.GPUSMMajor, r.TP, r.Packages = orEmptyInts(r.GPUSMMajor), orEmptyInts(r.TP), orEmptyMap(r.Packages)
	return r
}

type verifyJSON struct {
	File        string `json:"file"`
	What        string `json:"what"`
	When        string `json:"when"`
	Contains    string `json:"contains"`
	NotContains string `json:"not_contains"`
	Regex       string `json:"regex"`
	NotRegex    string `json:"not_regex"`
}

type upstreamJSON struct {
	Status      string   `json:"status"`
	PR          string   `json:"pr"`
	Link        string   `json:"link"`
	MergedIn    string   `json:"merged_in"`
	Marker      string   `json:"marker"`
	MarkerFile  string   `json:"marker_file"`
	MarkerFiles []string `json:"marker_files"`
}

// showOptions are smpatch show's flags, streams and dependencies.
type showOptions struct {
	IO      IOStreams
	Catalog func() (*patches.Catalog, error)
	Tree    func(ctx context.Context, repo string, project source.Project) (source.WritableTree, error)
	// Lock is how the command waits for the tree's journal lock, saying so on w.
	Lock  func(w io.Writer) journal.Options
	Color func(io.Writer) (io.Writer, painter)

	Name string
	Repo string
	JSON bool
}

func (o *showOptions) AddFlags(c *cobra.Command) {
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "the tree to show the diff for (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
}

func newShowCmd(f *Factory) *cobra.Command {
	o := &showOptions{Catalog: f.Catalog, Tree: f.Tree, Color: f.colorTarget, Lock: f.lockOptions}
	c := &cobra.Command{
		Use:   "show NAME",
		Short: "Show a patch: metadata, requirements, variants, and the diff it would make on a tree",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.IO, o.Name = streams(c), args[0]
			return runShow(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

// shown is what show found: the patch, and the tree with its journal and
// the plan there (when a tree was found).
type shown struct {
	p       *patches.Patch
	t       source.WritableTree
	treeErr error
	plan    *patches.Plan
	applied *journal.Entry // the patch's entry when the journal has it applied
}

// runShow shows the patch and the diff it would make on the tree as it is.
// It writes nothing: an apply or revert a kill left in flight is reported
// (the plan is then of the tree as the kill left it), not finished.
func runShow(ctx context.Context, o *showOptions) error {
	cat, err := o.Catalog()
	if err != nil {
		return err
	}
	sh := &shown{}
	if sh.p, err = cat.Get(o.Name); err != nil {
		return err
	}
	// A tree is optional for show: an explicit --repo must work,
	// otherwise look quietly.
	sh.t, sh.treeErr = o.Tree(ctx, o.Repo, sh.p.Project)
	if sh.treeErr != nil && o.Repo != "" {
		return sh.treeErr
	}
	if sh.t != nil {
		if err := sh.readJournal(ctx, o.IO.ErrOut, o.Lock(o.IO.ErrOut)); err != nil {
			return err
		}
		if sh.plan, err = patches.NewPlan(ctx, sh.p, sh.t, patches.PlanOptions{}); err != nil {
			return err
		}
	}
	if o.JSON {
		return showJSON(ctx, o.IO.Out, sh)
	}
	showText(ctx, o, sh)
	return nil
}

// readJournal reads the tree's journal, writing nothing: whether the patch
// is applied, and a line on errw for each entry in flight.
func (sh *shown) readJournal(ctx context.Context, errw io.Writer, opts journal.Options) error {
	j, err := journal.Read(ctx, sh.t, opts)
	if err != nil {
		return err
	}
	defer j.Close()
	ins, err := j.Interrupted()
	if err != nil {
		return err
	}
	for _, in := range ins {
		fmt.Fprintf(errw, "smpatch: %s; the plan below is of the tree as it is\n", in)
	}
	if e := j.State().Get(sh.p.Name); e != nil && e.State == journal.Applied {
		sh.applied = e
	}
	return nil
}

// showJSON prints show --json.
func showJSON(ctx context.Context, w io.Writer, sh *shown) error {
	p, t, plan, treeErr := sh.p, sh.t, sh.plan, sh.treeErr
	out := struct {
		Name      string        `json:"name"`
		Project   string        `json:"project"`
		Summary   string        `json:"summary"`
		Links     []string      `json:"links"`
		Origin    string        `json:"origin"`
		File      string        `json:"file"`
		Overrides bool          `json:"overrides"`
		Requires  requires.Set  `json:"requires"`
		Upstream  upstreamJSON  `json:"upstream"`
		Variants  []variantJSON `json:"variants"`
		Verify    []verifyJSON  `json:"verify"`
		Uncovered []string      `json:"uncovered"`
		Needs     []string      `json:"needs"`
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
		Requires: requiresJSON(p.Requires),
		Upstream: upstreamJSON{p.Upstream.Status, p.Upstream.PR, p.Upstream.Link, p.Upstream.MergedIn, p.Upstream.Marker, p.Upstream.MarkerFile, orEmpty(p.Upstream.MarkerFiles)},
		Variants: variantsJSON(p), Verify: []verifyJSON{}, Uncovered: uncoveredJSON(p), Needs: orEmpty(p.Needs), Digest: p.Digest,
	}
	for _, v := range p.Verify {
		out.Verify = append(out.Verify, verifyJSON{v.File, v.What, v.When, v.Contains, v.NotContains, v.Regex, v.NotRegex})
	}
	if t != nil {
		out.Tree = newTreeJSON(ctx, t)
		out.Plan = planToJSON(plan)
		if ok, where := patches.UpstreamMarker(t, p); ok {
			out.UpstreamMarker = where
		}
	} else if treeErr != nil {
		out.TreeError = treeErr.Error()
	}
	return WriteJSON(w, out)
}

// showText prints show for people.
func showText(ctx context.Context, o *showOptions, sh *shown) {
	w, p, t, plan := o.IO.Out, sh.p, sh.t, sh.plan
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
	if len(p.Needs) > 0 {
		fmt.Fprintf(w, "needs: %s (applied first, or named before it in the same apply)\n", strings.Join(p.Needs, ", "))
	}
	if u := p.Upstream; u.Status != "" || u.PR != "" || u.Link != "" || u.MergedIn != "" || u.Marker != "" {
		fmt.Fprintln(w, "upstream:")
		for _, kv := range [][2]string{{"status", u.Status}, {"pr", u.PR}, {"link", u.Link}, {"merged_in", u.MergedIn}, {"marker", u.Marker}, {"marker_file", u.MarkerFile}, {"marker_files", strings.Join(u.MarkerFiles, ", ")}} {
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
		fmt.Fprintf(w, "  gpu_sm_major: %s\n", joinInts(r.GPUSMMajor))
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
	if len(r.TP) > 0 {
		fmt.Fprintf(w, "  tp: %s\n", joinInts(r.TP))
	}
	if r.NVLink != nil {
		fmt.Fprintf(w, "  nvlink: %t\n", *r.NVLink)
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
		if v.Predicted != "" {
			fmt.Fprintf(w, "    predicted: %s\n", v.Predicted)
		}
	}
	if len(p.Verify) > 0 {
		fmt.Fprintln(w, "verify:")
		for _, v := range p.Verify {
			line := v.File
			if v.What != "" {
				line += ": " + v.What
			}
			var checks []string
			if v.Contains != "" {
				checks = append(checks, fmt.Sprintf("contains %q", v.Contains))
			}
			if v.NotContains != "" {
				checks = append(checks, fmt.Sprintf("does not contain %q", v.NotContains))
			}
			if v.Regex != "" {
				checks = append(checks, "matches /"+v.Regex+"/")
			}
			if v.NotRegex != "" {
				checks = append(checks, "does not match /"+v.NotRegex+"/")
			}
			if v.When != "" {
				checks = append(checks, "where it matches /"+v.When+"/")
			}
			fmt.Fprintf(w, "  %s (%s)\n", line, strings.Join(checks, "; "))
		}
	}
	if len(p.Uncovered) > 0 {
		fmt.Fprintln(w, "uncovered shapes (no variant has hunks for these; on a tree of one, apply refuses and names it):")
		for _, u := range p.Uncovered {
			printUncovered(w, u)
		}
	}
	if t == nil {
		fmt.Fprintf(w, "tree: none found (%v)\n", sh.treeErr)
		return
	}
	fmt.Fprintf(w, "tree: %s\n", patches.TreeLine(ctx, t))
	if e := sh.applied; e != nil {
		fmt.Fprintf(w, "applied: yes, variant %s, %s\n", e.Variant, e.AppliedAt.Format("2006-01-02 15:04:05Z07:00"))
	}
	if ok, where := patches.UpstreamMarker(t, p); ok && sh.applied == nil {
		fmt.Fprintf(w, "upstream: the tree already has the upstream change (marker %q at %s)\n", p.Upstream.Marker, where)
	}
	printPlan(w, plan)
	if plan.OK(false) && plan.Outcome() != patches.OutcomeAlreadyApplied {
		fmt.Fprintln(w, "diff it would make:")
		cw, paint := o.Color(w)
		_, _ = cw.Write(paint.diff(plan.UnifiedDiff()))
	}
}

// printUncovered writes one uncovered shape: its name and window on one
// line, why no variant covers it wrapped under them, and the marker that
// recognises it.
func printUncovered(w io.Writer, u patches.Uncovered) {
	if u.Name == "" {
		fmt.Fprintf(w, "  %s\n", wrapText(u.String(), 96, "  "))
		return
	}
	head := "  " + u.Name
	if u.Window != "" {
		head += ", in " + u.Window
	}
	fmt.Fprintln(w, head+":")
	if u.Why != "" {
		fmt.Fprintf(w, "      %s\n", wrapText(u.Why, 94, "      "))
	}
	switch {
	case u.File != "" && u.Contains != "":
		fmt.Fprintf(w, "      recognised by: %s containing %q\n", u.File, u.Contains)
	case u.File != "" && u.Regex != "":
		fmt.Fprintf(w, "      recognised by: %s matching /%s/\n", u.File, u.Regex)
	}
}

// wrapText breaks s at spaces into lines of at most width characters,
// every line after the first starting with indent.
func wrapText(s string, width int, indent string) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		if i > 0 && n+1+len(word) > width {
			b.WriteString("\n" + indent)
			n = 0
		} else if i > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

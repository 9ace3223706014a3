package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// What the commands share: the one JSON writer, the catalog, the lines
// about the journal's lock and a stop, and how a plan is printed for
// people and for --json.

// WriteJSON is the one writer of every --json document: indented by two
// spaces, one document per call, ">=" written as it is.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // ">= 0.5.8" as written, not "\u003e= 0.5.8"
	return enc.Encode(v)
}

// LoadCatalog is the built-in catalog with the --catalog directories,
// loaded on first use and kept for the rest of the command.
func (g *Globals) LoadCatalog() (*patches.Catalog, error) {
	if g.catalog != nil {
		return g.catalog, nil
	}
	cat, err := catalog.Load(g.CatalogDirs())
	if err != nil {
		return nil, err
	}
	g.catalog = cat
	return cat, nil
}

// waitingLine is the journal's notice that another smpatch holds the
// tree's lock, as one line on w.
func waitingLine(w io.Writer) func(string) {
	return func(line string) { fmt.Fprintf(w, "smpatch: %s\n", line) }
}

// stoppedBeforeWriting is err, or, when ctx has ended, the stop it caused
// before anything was written.
func stoppedBeforeWriting(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &journal.StoppedError{What: "stopped before writing: nothing was changed", Err: ctx.Err()}
	}
	return err
}

type variantJSON struct {
	Name     string   `json:"name"`
	Versions string   `json:"versions"`
	Diffs    []string `json:"diffs"`
	Files    []string `json:"files"`
	Search   []string `json:"search"`
	// Predicted says why the variant is not measured on a tree ("": it is).
	Predicted string `json:"predicted"`
}

func variantsJSON(p *patches.Patch) []variantJSON {
	out := []variantJSON{}
	for _, v := range p.Variants {
		vj := variantJSON{Name: v.Name, Versions: v.Versions, Diffs: orEmpty(v.Diffs), Search: orEmpty(v.Search), Files: []string{}, Predicted: v.Predicted}
		for _, fd := range v.Files {
			vj.Files = append(vj.Files, fd.Path())
		}
		out = append(out, vj)
	}
	return out
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

func newTreeJSON(ctx context.Context, t source.Tree) *treeJSON {
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

// printPlan prints the variant chosen and every hunk's status.
func printPlan(w io.Writer, pl *patches.Plan) {
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
		fmt.Fprintf(w, "  %s\n", pl.Shown(fp.Path))
		if fp.Note != "" {
			fmt.Fprintf(w, "    %s\n", fp.Note)
		}
		for _, h := range fp.Hunks {
			fmt.Fprintf(w, "    hunk #%d: %s", h.Index+1, hunkWords(h))
			fmt.Fprintln(w)
		}
	}
}

func hunkWords(h patches.HunkResult) string {
	switch h.Status {
	case patches.Exact:
		return fmt.Sprintf("exact at line %d", h.Line)
	case patches.Offset:
		return fmt.Sprintf("offset %+d (line %d)", h.Offset, h.Line)
	case patches.Fuzzy:
		return fmt.Sprintf("fuzzy at line %d (similarity %.2f)", h.Line, h.Score)
	case patches.AlreadyApplied:
		if strings.HasPrefix(h.Reason, "an equivalent change") {
			return fmt.Sprintf("already applied at line %d (%s)", h.Line, h.Reason)
		}
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

package upstream

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/go-git/go-git/v5"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
)

// Status is what a patch does on one upstream revision.
type Status string

const (
	Applies         Status = "applies"          // every hunk exact or offset
	Fuzzy           Status = "fuzzy"            // resolves, some hunk only by similarity
	AlreadyUpstream Status = "already-upstream" // every hunk already present: retire the patch
	Conflict        Status = "conflict"         // some hunk does not apply
	NoVariant       Status = "no-variant"       // no variant fits the revision
	Refused         Status = "refused"          // the hunks resolve, but a needed patch does not, or a verify rule fails on the result
	Error           Status = "error"            // the revision could not be read
)

// Failed reports whether s fails a check (fuzzy only when strict).
func (s Status) Failed(strict bool) bool {
	return s == Conflict || s == NoVariant || s == Refused || s == Error || (strict && s == Fuzzy)
}

// Result is one patch checked on one revision.
type Result struct {
	Project     source.Project `json:"project"`
	Patch       string         `json:"patch"`
	Status      Status         `json:"status"`
	Variant     string         `json:"variant,omitempty"`
	Version     string         `json:"version,omitempty"`
	VersionFrom string         `json:"version_from,omitempty"`
	// Revision names the tree checked: "URL@SHA" or a directory.
	Revision string `json:"revision"`
	Ref      string `json:"ref,omitempty"`
	Commit   string `json:"commit,omitempty"`
	// Detail says why, in one line: the conflict, the fuzzy score, the
	// variant reason.
	Detail string `json:"detail,omitempty"`
	// Target and Line locate the first hunk that needs attention in the
	// upstream file; Source and SourceLine locate its hunk in the patch's diff
	// (or the patch's TOML file) for annotations.
	Target     string `json:"target,omitempty"`
	Line       int    `json:"line,omitempty"`
	Source     string `json:"source,omitempty"`
	SourceLine int    `json:"source_line,omitempty"`
	// Hunks counts hunks by status ("exact": 2, "offset": 1).
	Hunks map[string]int `json:"hunks,omitempty"`
	// Attempts lists every variant planned, each with its first failing
	// hunk, when none resolves.
	Attempts []patches.Attempt `json:"attempts,omitempty"`
	// Shape names the uncovered shape the revision has (its marker
	// matched) when no variant resolves; Detail then says why.
	Shape string `json:"shape,omitempty"`
	// With --range: the status at the start of the range and every change
	// after it, oldest first.
	Range *RangeInfo `json:"range,omitempty"`
	// Lifecycle is where the patch stands upstream: its entry's
	// [upstream] and whether the revision already carries it (retire) or
	// contradicts the entry (stale), with the evidence.
	Lifecycle *Lifecycle `json:"upstream,omitempty"`
	Summary   string     `json:"-"`
}

// Options tune a check.
type Options struct {
	Strict bool
	// Progress receives progress lines of range walks (nil: none); the
	// command sets it only when stderr is a terminal.
	Progress io.Writer
	// reopen, when set, opens another handle on the repository a range is
	// walked in, for the walk's own reads.
	reopen func() (*git.Repository, error)
	brief  bool // plan for the status only (patches.PlanOptions.Brief)
}

// StatusOf classifies a plan.
func StatusOf(pl *patches.Plan) Status {
	switch pl.Outcome() {
	case patches.OutcomeApplies:
		return Applies
	case patches.OutcomeFuzzy:
		return Fuzzy
	case patches.OutcomeAlreadyApplied:
		return AlreadyUpstream
	case patches.OutcomeNoVariant:
		return NoVariant
	case patches.OutcomeRefused:
		return Refused
	}
	return Conflict
}

// CheckTree plans every patch on t (read-only) and reports one Result per
// patch, in the order given. An I/O error on one patch is reported as that
// patch's Error status; every patch is attempted.
func CheckTree(ctx context.Context, t source.Tree, ps []*patches.Patch, opts Options) []Result {
	out := make([]Result, 0, len(ps))
	for _, p := range ps {
		out = append(out, checkOne(ctx, t, p, opts, nil))
	}
	return out
}

func checkOne(ctx context.Context, t source.Tree, p *patches.Patch, opts Options, memo *patches.Memo) Result {
	r := Result{Project: p.Project, Patch: p.Name, Revision: t.Root(), Source: p.File, SourceLine: 1}
	// The patches p needs are planned first on the same revision, and the
	// verify rules judge the result, as apply would.
	pl, err := patches.PlanWithNeeds(ctx, p, t, patches.PlanOptions{Strict: opts.Strict, Memo: memo, Brief: opts.brief})
	if err != nil {
		r.Status = Error
		r.Detail = err.Error()
		return r
	}
	describe(&r, pl)
	return r
}

// describe fills r from a plan.
func describe(r *Result, pl *patches.Plan) {
	r.Status = StatusOf(pl)
	r.Variant = patches.VariantLabel(pl.Variant)
	r.Version = pl.Version
	r.VersionFrom = pl.VersionFrom
	r.Attempts = pl.Tried()
	r.Hunks = map[string]int{}
	var first *patches.HunkResult
	var firstFile *patches.FilePlan
	want := map[Status]patches.HunkStatus{Conflict: patches.Conflict, Fuzzy: patches.Fuzzy}
	for _, fp := range pl.Files {
		for i := range fp.Hunks {
			h := &fp.Hunks[i]
			r.Hunks[h.Status.String()]++
			if ws, ok := want[r.Status]; ok && first == nil && h.Status == ws {
				first, firstFile = h, fp
			}
		}
	}
	if len(r.Hunks) == 0 {
		r.Hunks = nil
	}
	// Annotations point into the patch's first diff unless a hunk needs
	// attention.
	if len(pl.Files) > 0 && pl.Files[0].Diff != nil {
		d := pl.Files[0].Diff
		r.Source, r.SourceLine = d.Source, d.Line
		if len(d.Hunks) > 0 {
			r.SourceLine = d.Hunks[0].Line
		}
	}
	switch r.Status {
	case Applies:
		r.Detail = "applies"
		if n := r.Hunks[patches.Offset.String()]; n > 0 {
			r.Detail = fmt.Sprintf("applies (%d hunk(s) at an offset)", n)
		}
	case AlreadyUpstream:
		r.Detail = "every hunk is already present upstream: time to retire the patch"
	case NoVariant:
		r.Detail = pl.Reason
	case Refused:
		r.Detail = pl.Refused
	case Fuzzy, Conflict:
		if first != nil {
			r.Target = firstFile.Path
			r.Line = first.Line
			if first.Nearest != nil && (r.Status == Conflict || r.Line == 0) {
				r.Line = first.Nearest.Start
			}
			if first.Index < len(firstFile.Diff.Hunks) && firstFile.Diff.Hunks[first.Index] != nil {
				h := firstFile.Diff.Hunks[first.Index]
				r.Source, r.SourceLine = firstFile.Diff.Source, h.Line
				if h.Source != "" {
					r.Source = h.Source
				}
			}
			if r.Status == Fuzzy {
				r.Detail = fmt.Sprintf("hunk %d of %s located by similarity (score %.2f) at line %d: %s", first.Index+1, firstFile.Path, first.Score, first.Line, first.Reason)
			} else {
				r.Detail = fmt.Sprintf("hunk %d of %s: %s", first.Index+1, firstFile.Path, first.Reason)
			}
		} else {
			r.Detail = pl.Reason
		}
	}
	if pl.Shape != nil {
		// One line: the shape and why it is not covered (the attempts stay
		// in Attempts, for --verbose and JSON).
		r.Shape = pl.Shape.Name
		r.Detail = pl.Reason
	}
	if r.Detail == "" {
		r.Detail = string(r.Status)
	}
	r.Lifecycle = lifecycleOf(r, pl)
}

// Report is the outcome of one smpatch check run.
type Report struct {
	Results []Result `json:"results"`
	Strict  bool     `json:"strict"`
	// Verbose lists every variant's attempt in the text report also where
	// the revision is a known uncovered shape.
	Verbose bool `json:"-"`
}

// Failed counts results that fail the check.
func (rp *Report) Failed() int {
	n := 0
	for _, r := range rp.Results {
		if r.Status.Failed(rp.Strict) {
			n++
		}
	}
	return n
}

// Counts counts results by status.
func (rp *Report) Counts() map[Status]int {
	m := map[Status]int{}
	for _, r := range rp.Results {
		m[r.Status]++
	}
	return m
}

// Projects lists the projects of the results in first-seen order.
func (rp *Report) Projects() []source.Project {
	var out []source.Project
	seen := map[source.Project]bool{}
	for _, r := range rp.Results {
		if !seen[r.Project] {
			seen[r.Project] = true
			out = append(out, r.Project)
		}
	}
	return out
}

// sortedKeys returns m's keys sorted.
func sortedKeys(m map[string]int) []string {
	return slices.Sorted(maps.Keys(m))
}

package upstream

import (
	"fmt"
	"strings"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
)

// Lifecycle is where a patch stands upstream on the revision checked: what
// its catalog entry says ([upstream] status, pr, link, merged_in) and what
// the revision shows, with the evidence read.
type Lifecycle struct {
	Status   string `json:"status,omitempty"`
	PR       string `json:"pr,omitempty"`
	Link     string `json:"link,omitempty"`
	MergedIn string `json:"merged_in,omitempty"`
	// Retire is set when the revision already carries the change: every
	// hunk is there (or upstream's marker is, past merged_in).
	Retire bool `json:"retire"`
	// Moved is set, with Retire, when the patch conflicts but every line
	// it adds is already in the revision: upstream has the change and has
	// since changed the lines around it.
	Moved bool `json:"moved,omitempty"`
	// Stale is set when the entry disagrees with the revision: it says
	// merged, at or before the revision's version, and the patch still
	// applies there (the lines it changes are upstream's as they were).
	Stale bool `json:"stale,omitempty"`
	// Verdict says the above in one line; Evidence is what was read
	// that says so, one line each (file:line of each hunk found).
	Verdict  string   `json:"verdict,omitempty"`
	Evidence []string `json:"evidence,omitempty"`
	// Since is, with --range, the commit of the range from which the
	// revision carries the change.
	Since *Change `json:"since,omitempty"`

	entry string // where the entry's [upstream] is, "FILE:LINE"
}

// maxEvidence is how many hunks a verdict lists before it counts the rest.
const maxEvidence = 8

// lifecycleOf reads the plan of a patch for its lifecycle; nil when the
// entry says nothing of upstream and the revision does not carry it.
func lifecycleOf(r *Result, pl *patches.Plan) *Lifecycle {
	p := pl.Patch
	u := p.Upstream
	lc := &Lifecycle{Status: u.Status, PR: u.PR, Link: u.Link, MergedIn: u.MergedIn}
	if f, n := p.UpstreamAt(); n > 0 {
		lc.entry = fmt.Sprintf("%s:%d", f, n)
	}
	switch {
	case r.Status == AlreadyUpstream && pl.Retired != "":
		lc.Retire = true
		lc.Evidence = append(lc.Evidence, pl.Retired)
	case r.Status == AlreadyUpstream:
		lc.Retire = true
		n := 0
		for _, f := range pl.Files {
			for _, h := range f.Hunks {
				if h.Status != patches.AlreadyApplied {
					continue
				}
				if n++; n > maxEvidence {
					continue
				}
				src := ""
				if f.Diff != nil && h.Index < len(f.Diff.Hunks) && f.Diff.Hunks[h.Index] != nil {
					src = fmt.Sprintf(" (%s:%d)", f.Diff.Source, f.Diff.Hunks[h.Index].Line)
				}
				e := fmt.Sprintf("%s:%d: hunk %d%s is already there", f.Path, h.Line, h.Index+1, src)
				if h.Reason != "" && strings.Contains(h.Reason, "equivalent") {
					e += ": " + h.Reason
				}
				lc.Evidence = append(lc.Evidence, e)
			}
		}
		if n > maxEvidence {
			lc.Evidence = append(lc.Evidence, fmt.Sprintf("and %d more hunks", n-maxEvidence))
		}
	case r.Status == Conflict:
		// Upstream may have taken the change and then moved the lines
		// around it: every hunk's added lines are there, in order.
		if ev := addedLinesThere(pl); ev != nil {
			lc.Retire, lc.Moved = true, true
			lc.Evidence = ev
		}
	case u.IsMerged() && u.MergedIn != "" && !u.MergedInCommit() && r.Version != "" && (r.Status == Applies || r.Status == Fuzzy):
		// The patch's old lines are there: the revision lacks the change
		// (a conflict or no variant says nothing either way).
		m, err1 := source.ParseVersion(u.MergedIn)
		v, err2 := source.ParseVersion(r.Version)
		if err1 == nil && err2 == nil && !v.LessThan(m) {
			lc.Stale = true
			lc.Evidence = append(lc.Evidence, fmt.Sprintf("the revision's version %s (%s) is at or past merged_in %s, and the patch still %s there", r.Version, r.VersionFrom, u.MergedIn, r.Status))
		}
	}
	if !lc.Retire && !lc.Stale && u.Status == "" && u.PR == "" && u.Link == "" && u.MergedIn == "" {
		return nil
	}
	return lc
}

// revisionName is how a verdict names the revision checked: REF (SHORT),
// else the revision as given.
func revisionName(r Result) string {
	switch {
	case r.Ref != "" && r.Commit != "":
		return fmt.Sprintf("%s (%s)", r.Ref, short(r.Commit))
	case r.Commit != "":
		return short(r.Commit)
	}
	return r.Revision
}

// settle writes each result's verdict, once the revision's ref, commit and
// range are known.
func (rp *Report) settle() {
	for i := range rp.Results {
		r := &rp.Results[i]
		lc := r.Lifecycle
		if lc == nil {
			continue
		}
		if lc.Retire && lc.Since == nil && r.Range != nil {
			// The last time the patch became already-upstream: for a patch
			// that conflicts now, the commit that took the change.
			for j := len(r.Range.Changes) - 1; j >= 0; j-- {
				if c := r.Range.Changes[j]; c.To == AlreadyUpstream {
					lc.Since = &c
					lc.Evidence = append(lc.Evidence, fmt.Sprintf("upstream since %s %s: %s", short(c.Commit), c.Date.Format("2006-01-02"), c.Subject))
					break
				}
			}
			if lc.Since == nil && r.Range.Start == AlreadyUpstream {
				lc.Evidence = append(lc.Evidence, fmt.Sprintf("already upstream at the start of the range (%s)", short(r.Range.Base)))
			}
		}
		rev := revisionName(*r)
		if r.Version != "" {
			rev += ", version " + r.Version
		}
		switch {
		case lc.Retire && lc.Moved:
			lc.Verdict = fmt.Sprintf("upstream has the change at %s: every line the patch adds is there, and the lines around it changed since (hence the conflict): the patch may be retired", rev)
		case lc.Retire:
			lc.Verdict = fmt.Sprintf("already applied upstream at %s: the patch may be retired", rev)
			if lc.Status != "merged" {
				rec := ""
				switch {
				case lc.Since != nil:
					rec = short(lc.Since.Commit)
				case r.Version != "":
					rec = r.Version
				case r.Commit != "":
					rec = short(r.Commit)
				}
				if rec != "" {
					rec = ", merged_in = \"" + rec + "\""
				}
				was := "says nothing of upstream"
				if lc.Status != "" {
					was = fmt.Sprintf("says status = %q", lc.Status)
				}
				lc.Verdict += fmt.Sprintf(" (its entry %s: record status = \"merged\"%s)", was, rec)
			}
		case lc.Stale:
			lc.Verdict = fmt.Sprintf("the entry says merged upstream in %s, but %s does not carry the change: the patch still %s", lc.MergedIn, rev, r.Status)
		}
	}
}

// Verdicts are the results with a lifecycle verdict.
func (rp *Report) verdicts() []Result {
	var out []Result
	for _, r := range rp.Results {
		if r.Lifecycle != nil && r.Lifecycle.Verdict != "" {
			out = append(out, r)
		}
	}
	return out
}

// addedLinesThere is the evidence that the revision carries every line a
// conflicting plan's hunks add (at least one that is not blank per hunk),
// each hunk's added lines consecutive and in order in the file; nil when
// one is missing or a hunk only removes lines.
func addedLinesThere(pl *patches.Plan) []string {
	var ev []string
	for _, f := range pl.Files {
		if f.Diff == nil || f.Old == nil {
			return nil
		}
		lines := strings.Split(strings.ReplaceAll(string(f.Old), "\r\n", "\n"), "\n")
		for i, h := range f.Diff.Hunks {
			var block []string
			nonBlank := false
			for k, op := range h.Ops {
				if op == '+' {
					l := strings.TrimRight(h.Lines[k], "\r")
					block = append(block, l)
					nonBlank = nonBlank || strings.TrimSpace(l) != ""
				}
			}
			if !nonBlank {
				return nil
			}
			at := findBlock(lines, block)
			if at < 0 {
				return nil
			}
			if len(ev) < maxEvidence {
				ev = append(ev, fmt.Sprintf("%s:%d: the %d line(s) hunk %d (%s:%d) adds are there", f.Path, at+1, len(block), i+1, f.Diff.Source, h.Line))
			}
		}
	}
	if len(ev) == 0 {
		return nil
	}
	return ev
}

// findBlock is the index of the first line of lines where block's lines
// follow one another (whitespace at the ends of a line aside), or -1.
func findBlock(lines, block []string) int {
	for i := 0; i+len(block) <= len(lines); i++ {
		ok := true
		for k, b := range block {
			if strings.TrimSpace(lines[i+k]) != strings.TrimSpace(b) {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

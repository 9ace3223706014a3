package patches

import (
	"fmt"
	"strings"

	"github.com/smpatch/smpatch/patches/udiff"
)

// A hunk that conflicts because the tree already has its change in another
// spelling (a hand edit, `... or is_sm120_supported())` for `... or
// _is_sm120_supported)`) is recognised by the patch's verify rules: a rule
// with a positive check proves a hunk when the hunk's new side satisfies
// the check and its old side does not; when every rule that proves the
// hunk already holds on the file, in its own right, the hunk is already
// applied (an equivalent change) and the other hunks of the file are
// planned without it. A rule that only says what must be gone proves
// nothing: that text may have been replaced by anything.

// settleEquivalent is fp with each conflicting hunk that the file already
// carries by an equivalent change marked already applied, and the file
// planned again without those hunks; fp itself when there is none.
func settleEquivalent(fp *FilePlan, data []byte, fd *FileDiff, p *Patch, path string, explain bool) *FilePlan {
	if p == nil || len(p.Verify) == 0 || data == nil || !fp.Conflicts() || fd.IsCreate() || fd.IsDelete() {
		return fp
	}
	done := map[int]HunkResult{}
	for _, h := range fp.Hunks {
		if h.Status != Conflict || h.Index >= len(fd.Hunks) {
			continue
		}
		if r, ok := equivalentDone(p, path, fd.Hunks[h.Index], data); ok {
			r.Index, r.Path = h.Index, h.Path
			done[h.Index] = r
		}
	}
	if len(done) == 0 {
		return fp
	}
	rest := *fd
	rest.Hunks = nil
	var index []int // rest's hunk -> fd's
	for i, h := range fd.Hunks {
		if _, ok := done[i]; !ok {
			rest.Hunks = append(rest.Hunks, h)
			index = append(index, i)
		}
	}
	r := udiff.MatchBrief
	if explain {
		r = udiff.Match
	}
	res := r(data, &rest)
	out := &FilePlan{Path: fp.Path, Note: fp.Note, Result: *res}
	out.Diff = fd
	out.Hunks = make([]HunkResult, 0, len(fd.Hunks))
	j := 0
	for i := range fd.Hunks {
		if h, ok := done[i]; ok {
			out.Hunks = append(out.Hunks, h)
			continue
		}
		h := res.Hunks[j]
		h.Index = index[j]
		out.Hunks = append(out.Hunks, h)
		j++
	}
	return out
}

// equivalentDone reports whether the file data at path already carries
// hunk h by an equivalent change: some verify rule on path proves h, and
// every one that does holds on data. The result says which rule and where.
func equivalentDone(p *Patch, path string, h *Hunk, data []byte) (HunkResult, bool) {
	oldSide, newSide := hunkText(h)
	var proving []*VerifyRule
	for i := range p.Verify {
		r := &p.Verify[i]
		if r.File == path && r.Proves(oldSide, newSide) {
			proving = append(proving, r)
		}
	}
	if len(proving) == 0 {
		return HunkResult{}, false
	}
	for _, r := range proving {
		if !r.Carries(data) {
			return HunkResult{}, false
		}
	}
	titles := make([]string, len(proving))
	for i, r := range proving {
		titles[i] = r.Title()
	}
	return HunkResult{
		Status: AlreadyApplied,
		Line:   proving[0].Where(data),
		Reason: fmt.Sprintf("an equivalent change is already there (%s)", strings.Join(titles, "; ")),
	}, true
}

// hunkText is a hunk's old side and new side, each as text (lines joined,
// each ending in "\n").
func hunkText(h *Hunk) (oldSide, newSide []byte) {
	var o, n strings.Builder
	for i, op := range h.Ops {
		l := strings.TrimSuffix(h.Lines[i], "\r") + "\n"
		if op != '+' {
			o.WriteString(l)
		}
		if op != '-' {
			n.WriteString(l)
		}
	}
	return []byte(o.String()), []byte(n.String())
}

package udiff

import (
	"bytes"
	"fmt"
	"strings"
	"unsafe"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// The fuzz policy. A hunk whose old side is not found byte for byte (at its
// line or at any offset) may still be placed by similarity, as follows.
//
//  1. A candidate region is located with diff-match-patch's bitap matcher
//     over lines (at most half of the first 32 old-side lines may differ),
//     and the old side is aligned to the region around it by longest common
//     subsequence.
//  2. Anchors must be there exactly: every removed line, and for a pure
//     insertion the context line just before it and just after it. Anchors
//     of one change must be found in the hunk's order with no file line
//     between them. A missing anchor, or a line between anchors, is a
//     conflict: that is where the change goes, and a guess there could
//     change the wrong code.
//  3. Every other context line is only evidence of place. A context line
//     that is missing (or changed) and a file line that is not in the hunk
//     (inserted upstream between context lines) count the same way: each
//     lowers the score and is named in the reason ("1 of 7 context lines
//     not found", "1 line not in the hunk between its context lines").
//  4. The score is 2 × (old-side lines found) / (old-side lines + lines of
//     the region they span); below FuzzyMinScore the hunk is a conflict.
//
// So one missing context line and one inserted line away from the change
// are both fuzzy, and both are conflicts next to it.

// FuzzyMinScore is the lowest score (see the fuzz policy above) at which a
// fuzzy match is accepted.
const FuzzyMinScore = 0.6

// fuzzyPatternLines caps the lines handed to the bit-parallel matcher (it
// works on machine words).
const fuzzyPatternLines = 32

// text is a file split into lines.
type text struct {
	lines   []string // raw lines without "\n" (a '\r' before it is kept)
	keys    []string // lines without a trailing '\r', for comparison
	size    int      // length of the file in bytes
	finalNL bool     // the last line ends with "\n" (true for an empty file)
	crlf    bool     // most line endings are "\r\n"
}

func splitText(data []byte) *text {
	t := &text{finalNL: true, size: len(data)}
	// Every line is a substring of the file's bytes, taken as they are:
	// the bytes of a file read or planned are never written to afterwards
	// (results keep them as Result.Old and New), so no copy is made.
	rest := unsafe.String(unsafe.SliceData(data), len(data))
	t.lines = make([]string, 0, bytes.Count(data, []byte{'\n'})+1)
	crlf, lf := 0, 0
	for len(rest) > 0 {
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			t.lines = append(t.lines, rest)
			t.finalNL = false
			break
		}
		line := rest[:i]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			crlf++
		} else {
			lf++
		}
		t.lines = append(t.lines, line)
		rest = rest[i+1:]
	}
	t.crlf = crlf > lf
	if crlf == 0 && (t.finalNL || len(t.lines) == 0 || !strings.HasSuffix(t.lines[len(t.lines)-1], "\r")) {
		// No line ends in '\r': the keys are the lines.
		t.keys = t.lines
		return t
	}
	t.keys = make([]string, len(t.lines))
	for i, l := range t.lines {
		t.keys[i] = strings.TrimSuffix(l, "\r")
	}
	return t
}

// hunkSides returns the comparison keys of a hunk's old and new sides.
func hunkSides(h *Hunk) (oldK, newK []string) {
	for i, op := range h.Ops {
		k := strings.TrimSuffix(h.Lines[i], "\r")
		if op != '+' {
			oldK = append(oldK, k)
		}
		if op != '-' {
			newK = append(newK, k)
		}
	}
	return oldK, newK
}

func matchAt(keys []string, pos int, side []string) bool {
	if pos < 0 || pos+len(side) > len(keys) {
		return false
	}
	for i, s := range side {
		if keys[pos+i] != s {
			return false
		}
	}
	return true
}

// outLine is one line of a replacement: raw text without "\n", and whether it
// comes from the diff (then it takes the file's line ending).
type outLine struct {
	s      string
	added  bool
	oldIdx int // index in the old file, -1 for added lines
}

// edit replaces old lines [start, end) with repl.
type edit struct {
	start, end int
	repl       []outLine
	hunk       *Hunk
}

// Match resolves every hunk of fd against a file's bytes. old is nil when
// the file does not exist (only a diff that creates the file, or deletes
// it, makes sense then). The result's New bytes are set only when no hunk
// conflicts. A hunk that conflicts is explained: why, and the nearest
// region found.
func Match(old []byte, fd *FileDiff) *Result { return match(old, fd, true) }

// MatchBrief is Match for the outcome only: a hunk that conflicts is not
// explained further (its reason may be shorter and no nearest region is
// sought when nothing similar is found); every status is the same.
func MatchBrief(old []byte, fd *FileDiff) *Result { return match(old, fd, false) }

// MatchHunk resolves the hunk h alone against the file data, as
// MatchBrief would (an anchor search asks whether and how well the first
// hunk of a diff lands in each candidate file).
func MatchHunk(data []byte, h *Hunk) HunkResult {
	res, _, _, _ := matchHunk(splitText(data), h, 0, 0, false)
	return res
}

// match resolves fd's hunks against old; without explain, a hunk that
// conflicts is not explained further (see matchHunk).
func match(old []byte, fd *FileDiff, explain bool) *Result {
	exists := old != nil
	fp := &Result{Diff: fd, Old: old, Create: fd.IsCreate(), Delete: fd.IsDelete()}
	switch {
	case fd.IsCreate():
		matchCreate(fp, exists)
		return fp
	case fd.IsDelete():
		matchDelete(fp, exists)
		return fp
	case !exists:
		for i := range fd.Hunks {
			fp.Hunks = append(fp.Hunks, HunkResult{Index: i, Status: Conflict, Reason: "file not found"})
		}
		if len(fd.Hunks) == 0 {
			fp.Hunks = append(fp.Hunks, HunkResult{Index: 0, Status: Conflict, Reason: "file not found"})
		}
		return fp
	}
	t := splitText(old)
	var edits []edit
	offset, minPos := 0, 0
	for i, h := range fd.Hunks {
		res, e, nextOffset, nextMin := matchHunk(t, h, offset, minPos, explain)
		res.Index = i
		fp.Hunks = append(fp.Hunks, res)
		if res.Status == Conflict {
			continue
		}
		offset, minPos = nextOffset, nextMin
		if e != nil {
			edits = append(edits, *e)
		}
	}
	for _, r := range fp.Hunks {
		if r.Status == Conflict {
			return fp
		}
	}
	fp.New = assemble(t, edits)
	return fp
}

// newContent is the text a creating diff writes.
func newContent(fd *FileDiff) []byte {
	var b bytes.Buffer
	noNL := false
	for _, h := range fd.Hunks {
		for i, op := range h.Ops {
			if op != '-' {
				b.WriteString(h.Lines[i])
				b.WriteByte('\n')
			}
		}
		noNL = h.NoNewlineNew
	}
	out := b.Bytes()
	if noNL && len(out) > 0 {
		out = out[:len(out)-1]
	}
	if out == nil {
		out = []byte{}
	}
	return out
}

func sameText(a, b []byte) bool {
	return bytes.Equal(bytes.ReplaceAll(a, []byte("\r\n"), []byte("\n")), bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")))
}

func matchCreate(fp *Result, exists bool) {
	content := newContent(fp.Diff)
	res := HunkResult{Index: 0, Line: 0}
	switch {
	case !exists:
		res.Status = Exact
		fp.New = content
	case sameText(fp.Old, content):
		res.Status = AlreadyApplied
		res.Reason = "file already exists with the new content"
		fp.New = fp.Old
		fp.Create = false
	default:
		res.Status = Conflict
		res.Reason = "file to be created already exists"
		res.Nearest = regionOf(splitText(fp.Old), 0, min(len(splitText(fp.Old).lines), 10))
	}
	fp.Hunks = append(fp.Hunks, res)
}

func matchDelete(fp *Result, exists bool) {
	res := HunkResult{Index: 0, Line: 1}
	if !exists {
		res.Status = AlreadyApplied
		res.Reason = "file already deleted"
		fp.Delete = false
		fp.Hunks = append(fp.Hunks, res)
		return
	}
	t := splitText(fp.Old)
	var oldK []string
	for _, h := range fp.Diff.Hunks {
		o, _ := hunkSides(h)
		oldK = append(oldK, o...)
	}
	if len(oldK) == len(t.keys) && matchAt(t.keys, 0, oldK) {
		res.Status = Exact
		fp.New = nil
	} else {
		res.Status = Conflict
		res.Reason = "file to be deleted differs from the diff's old side"
		res.Nearest = regionOf(t, 0, min(len(t.lines), max(len(oldK), 1)))
	}
	fp.Hunks = append(fp.Hunks, res)
}

// regionOf describes old lines [start, end) (0-based) as a 1-based Region.
func regionOf(t *text, start, end int) *Region {
	n := len(t.lines)
	if n == 0 {
		return nil // an empty file has no region to show
	}
	// At least one line, and never past the end: a hunk expected beyond
	// the last line shows the file's last lines.
	width := max(end-start, 1)
	start = max(0, min(start, n-width))
	end = min(start+width, n)
	// A copy: the lines share the file's bytes (splitText), a region
	// may outlive them.
	return &Region{Start: start + 1, End: end, Text: strings.Clone(strings.Join(t.keys[start:end], "\n"))}
}

// matchHunk resolves one hunk. offset is the cumulative offset of earlier
// hunks; minPos the first old line a hunk may touch. It returns the result,
// the edit (nil when nothing changes) and the offset and minPos for the next
// hunk. Without explain, a conflict does not look for the nearest region
// (an anchor search only needs to know whether the hunk resolves).
func matchHunk(t *text, h *Hunk, offset, minPos int, explain bool) (HunkResult, *edit, int, int) {
	oldK, newK := hunkSides(h)
	n, m := len(oldK), len(newK)
	pos0 := h.OldStart - 1 // 0-based index of the first old line
	if h.OldLines == 0 {
		pos0 = h.OldStart // insertion after line OldStart
	}
	exp := pos0 + offset
	maxStart := len(t.keys) - n
	if exp < minPos {
		exp = minPos
	}
	if exp > len(t.keys) {
		exp = len(t.keys)
	}
	lineOf := func(p int) int {
		if h.OldLines == 0 {
			return p
		}
		return p + 1
	}
	applied := func(p int) (HunkResult, *edit, int, int) {
		st := Exact
		if p != pos0 {
			st = Offset
		}
		repl := make([]outLine, 0, m)
		oi := 0
		for i, op := range h.Ops {
			switch op {
			case ' ':
				repl = append(repl, outLine{s: t.lines[p+oi], oldIdx: p + oi})
				oi++
			case '-':
				oi++
			case '+':
				repl = append(repl, outLine{s: strings.TrimSuffix(h.Lines[i], "\r"), added: true, oldIdx: -1})
			}
		}
		return HunkResult{Status: st, Line: lineOf(p), Offset: p - pos0},
			&edit{start: p, end: p + n, repl: repl, hunk: h}, p - pos0, p + n
	}
	already := func(q int) (HunkResult, *edit, int, int) {
		return HunkResult{Status: AlreadyApplied, Line: lineOf(q), Offset: q - pos0},
			nil, q + m - pos0 - n, q + m
	}
	// A side can only prove presence when it has lines; prefer the longer
	// side when both are present at the same place.
	oldAt := func(p int) bool { return p >= minPos && p <= maxStart && matchAt(t.keys, p, oldK) }
	newAt := func(q int) bool { return m > 0 && q >= minPos && matchAt(t.keys, q, newK) }
	preferNew := m > n
	try := func(p int) (int, bool) { // 0 none, 1 old, 2 new
		o, nw := oldAt(p), newAt(p)
		switch {
		case o && nw && preferNew:
			return 2, true
		case o:
			return 1, true
		case nw:
			return 2, true
		}
		return 0, false
	}
	limit := max(exp-minPos, len(t.keys)-exp) + 1
	for d := 0; d <= limit; d++ {
		for _, p := range []int{exp - d, exp + d} {
			if d == 0 && p != exp {
				continue
			}
			if k, ok := try(p); ok {
				if k == 1 {
					return applied(p)
				}
				return already(p)
			}
			if d == 0 {
				break
			}
		}
	}
	if n == 0 {
		return HunkResult{Status: Conflict, Line: lineOf(exp), Reason: fmt.Sprintf("insertion point line %d is not in the file", h.OldStart)}, nil, offset, minPos
	}
	return matchFuzzy(t, h, oldK, pos0, exp, minPos, offset, explain)
}

// matchFuzzy locates a candidate with diff-match-patch's bitap matcher over
// lines, aligns the hunk's old side to it, and accepts it only when every
// removed line is present byte for byte, in runs as in the hunk, and the
// similarity reaches FuzzyMinScore.
func matchFuzzy(t *text, h *Hunk, oldK []string, pos0, exp, minPos, offset int, explain bool) (HunkResult, *edit, int, int) {
	n := len(oldK)
	conflict := func(reason string, near *Region) (HunkResult, *edit, int, int) {
		return HunkResult{Status: Conflict, Line: h.OldStart, Reason: reason, Nearest: near}, nil, offset, minPos
	}
	cand := locate(t.keys[minPos:], oldK, exp-minPos)
	if cand < 0 && !explain {
		return conflict("no similar region found", nil)
	}
	if cand < 0 {
		s, e, best := bestWindow(t, oldK, exp, minPos)
		if best == 0 {
			return conflict(fmt.Sprintf("no similar region found (expected near line %d)", exp+1), regionOf(t, exp, exp+n))
		}
		return conflict(fmt.Sprintf("no region similar enough; the best shares %d of %d lines", best, n), regionOf(t, s, e))
	}
	p := minPos + cand
	slack := max(3, n/2)
	ws, we := max(minPos, p-slack), min(len(t.keys), p+n+slack)
	align := lcsAlign(oldK, t.keys[ws:we])
	first, last, matched := -1, -1, 0
	for i, a := range align {
		if a >= 0 {
			align[i] = a + ws
			if first < 0 {
				first = align[i]
			}
			last = align[i]
			matched++
		}
	}
	if matched == 0 {
		return conflict("no similar region found", regionOf(t, p, p+n))
	}
	near := regionOf(t, first, last+1)
	score := 2 * float64(matched) / float64(n+last+1-first)
	// Every removed line must be there, removed lines contiguous as in the
	// hunk, and a pure insertion must sit between the context lines that
	// surround it in the hunk, with nothing between them.
	oldIdx := make([]int, len(h.Ops)) // op index -> old-side index, -1 for '+'
	oi := 0
	for i, op := range h.Ops {
		oldIdx[i] = -1
		if op != '+' {
			oldIdx[i] = oi
			oi++
		}
	}
	for i := 0; i < len(h.Ops); {
		if h.Ops[i] == ' ' {
			i++
			continue
		}
		j := i
		for j < len(h.Ops) && h.Ops[j] != ' ' {
			j++
		}
		// A block that removes lines is anchored by them; a pure insertion
		// only by the context lines on both sides of it.
		lo, hi := i, j
		if !bytes.ContainsRune(h.Ops[i:j], '-') {
			if lo > 0 {
				lo--
			}
			if hi < len(h.Ops) {
				hi++
			}
		}
		prev := -1
		for k := lo; k < hi; k++ {
			o := oldIdx[k]
			if o < 0 {
				continue
			}
			a := align[o]
			if a < 0 {
				if h.Ops[k] == '-' {
					return conflict(fmt.Sprintf("removed line %q not found near line %d", clip(h.Lines[k]), p+1), near)
				}
				return conflict(fmt.Sprintf("context line %q next to the change not found near line %d", clip(h.Lines[k]), p+1), near)
			}
			if prev >= 0 && a != prev+1 {
				return conflict(fmt.Sprintf("lines around the change are not contiguous near line %d", a+1), near)
			}
			prev = a
		}
		i = j
	}
	if score < FuzzyMinScore {
		return conflict(fmt.Sprintf("best candidate at line %d is only %.2f similar (need %.2f)", first+1, score, FuzzyMinScore), near)
	}
	// Merge: file lines between aligned ones are kept; added lines go just
	// before the next aligned line (or at the end).
	var repl []outLine
	var pending []outLine
	fi := first
	oi = 0
	for i, op := range h.Ops {
		if op == '+' {
			pending = append(pending, outLine{s: strings.TrimSuffix(h.Lines[i], "\r"), added: true, oldIdx: -1})
			continue
		}
		a := align[oi]
		oi++
		if a < 0 {
			continue
		}
		for ; fi < a; fi++ {
			repl = append(repl, outLine{s: t.lines[fi], oldIdx: fi})
		}
		repl = append(repl, pending...)
		pending = nil
		if op == ' ' {
			repl = append(repl, outLine{s: t.lines[a], oldIdx: a})
		}
		fi = a + 1
	}
	repl = append(repl, pending...)
	res := HunkResult{
		Status: Fuzzy, Line: first + 1, Offset: first - pos0, Score: score,
		Reason: fuzzyReason(align, n),
	}
	return res, &edit{start: first, end: last + 1, repl: repl, hunk: h}, first - pos0, last + 1
}

// fuzzyReason says what differs around a fuzzy hunk, from the alignment of
// its old side (align[i]: file line of old line i, -1 when not found):
// between two lines found, old lines not found facing as many file lines
// are changed; the rest are missing (old) or not in the hunk (file).
func fuzzyReason(align []int, n int) string {
	changed, missing, extra := 0, 0, 0
	po, pa := -1, -1
	for o, a := range align {
		if a < 0 {
			continue
		}
		if pa >= 0 {
			gm, ge := o-po-1, a-pa-1
			c := min(gm, ge)
			changed += c
			missing += gm - c
			extra += ge - c
		} else {
			missing += o // old lines before the first found
		}
		po, pa = o, a
	}
	missing += n - 1 - po // old lines after the last found
	var parts []string
	if changed > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d context lines changed", changed, n))
	}
	if missing > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d context lines not found", missing, n))
	}
	if extra == 1 {
		parts = append(parts, "1 line not in the hunk between its context lines")
	} else if extra > 1 {
		parts = append(parts, fmt.Sprintf("%d lines not in the hunk between its context lines", extra))
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("all %d context lines found", n))
	}
	return strings.Join(parts, ", ")
}

func clip(s string) string {
	s = strings.TrimSuffix(s, "\r")
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// locate runs diff-match-patch's bitap matcher with each distinct line of
// the pattern mapped to one byte; lines outside the pattern map to 0. It
// returns the index of the best match near loc, or -1.
func locate(keys, pattern []string, loc int) int {
	if len(pattern) > fuzzyPatternLines {
		pattern = pattern[:fuzzyPatternLines]
	}
	code := map[string]byte{}
	pat := make([]byte, len(pattern))
	for i, k := range pattern {
		c, ok := code[k]
		if !ok {
			c = byte(len(code) + 1)
			code[k] = c
		}
		pat[i] = c
	}
	txt := make([]byte, len(keys))
	for i, k := range keys {
		txt[i] = code[k]
	}
	dmp := diffmatchpatch.New()
	dmp.MatchThreshold = 0.5
	dmp.MatchDistance = 1000
	loc = max(0, min(loc, len(txt)))
	return dmp.MatchMain(string(txt), string(pat), loc)
}

// bestWindow finds the window of len(oldK) lines sharing the most lines with
// the hunk's old side, nearest to exp on ties. It returns the window and the
// count shared.
func bestWindow(t *text, oldK []string, exp, minPos int) (int, int, int) {
	n := len(oldK)
	want := map[string]int{}
	for _, k := range oldK {
		want[k]++
	}
	have := map[string]int{}
	// Only lines of the hunk are counted: most file lines are not.
	add := func(k string, c *int) {
		w, ok := want[k]
		if !ok {
			return
		}
		if have[k] < w {
			*c++
		}
		have[k]++
	}
	remove := func(k string, c *int) {
		w, ok := want[k]
		if !ok {
			return
		}
		have[k]--
		if have[k] < w {
			*c--
		}
	}
	bestS, best, bestD := exp, 0, -1
	c := 0
	end := minPos // window is [s, end)
	for s := minPos; s < max(len(t.keys)-n+1, minPos+1); s++ {
		for ; end < min(s+n, len(t.keys)); end++ {
			add(t.keys[end], &c)
		}
		d := s - exp
		if d < 0 {
			d = -d
		}
		if c > best || (c == best && c > 0 && d < bestD) {
			bestS, best, bestD = s, c, d
		}
		if s < end {
			remove(t.keys[s], &c)
		}
	}
	return bestS, bestS + n, best
}

// lcsAlign aligns a to b by longest common subsequence: out[i] is the index
// in b of a[i], or -1.
func lcsAlign(a, b []string) []int {
	na, nb := len(a), len(b)
	dp := make([][]int32, na+1)
	for i := range dp {
		dp[i] = make([]int32, nb+1)
	}
	for i := na - 1; i >= 0; i-- {
		for j := nb - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	out := make([]int, na)
	i, j := 0, 0
	for i < na && j < nb {
		switch {
		case a[i] == b[j] && dp[i][j] == dp[i+1][j+1]+1:
			out[i] = j
			i++
			j++
		case dp[i+1][j] >= dp[i][j+1]:
			out[i] = -1
			i++
		default:
			j++
		}
	}
	for ; i < na; i++ {
		out[i] = -1
	}
	return out
}

// assemble applies non-overlapping, ordered edits to t and produces bytes:
// kept lines keep their own endings, added lines take the file's, and the
// final newline is kept as the file had it unless a hunk at the end of the
// file says otherwise.
func assemble(t *text, edits []edit) []byte {
	// First the number of output lines (to know the last one), the final
	// newline and the bytes the diff adds; then one pass writes the output.
	n, pos, grow := 0, 0, 0
	finalNL := t.finalNL
	for _, e := range edits {
		n += max(e.start-pos, 0) + len(e.repl)
		pos = e.end
		for _, l := range e.repl {
			if l.added {
				grow += len(l.s) + 2
			}
		}
		if e.end == len(t.lines) && (e.hunk.NoNewlineOld || e.hunk.NoNewlineNew) {
			finalNL = !e.hunk.NoNewlineNew
		}
	}
	n += max(len(t.lines)-pos, 0)
	cr := ""
	if t.crlf {
		cr = "\r"
	}
	b := make([]byte, 0, t.size+grow+2)
	i, lastAdded := 0, false
	put := func(l outLine) {
		b = append(b, l.s...)
		last := i == n-1
		if l.added || (l.oldIdx == len(t.lines)-1 && !t.finalNL && (!last || finalNL)) {
			// Lines from the diff, and an old last line that gains a
			// successor, take the file's line ending.
			if !strings.HasSuffix(l.s, "\r") {
				b = append(b, cr...)
			}
		}
		if !last || finalNL {
			b = append(b, '\n')
		}
		i++
		lastAdded = l.added
	}
	pos = 0
	for _, e := range edits {
		for ; pos < e.start; pos++ {
			put(outLine{s: t.lines[pos], oldIdx: pos})
		}
		for _, l := range e.repl {
			put(l)
		}
		pos = e.end
	}
	for ; pos < len(t.lines); pos++ {
		put(outLine{s: t.lines[pos], oldIdx: pos})
	}
	if len(b) == 0 {
		return []byte{}
	}
	if !finalNL && b[len(b)-1] == '\r' && lastAdded {
		// An added last line without a newline gets no dangling '\r'.
		b = b[:len(b)-1]
	}
	return b
}

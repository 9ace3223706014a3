package udiff

import (
	"bytes"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// The one line differ and the one unified-diff writer of smpatch: a diff
// smpatch makes (apply --dry-run, show, a revert that meets a changed
// file) is hunks from Hunks, written by FileDiff.Format, the writer that
// also writes parsed diffs back out.

// Context is the context a generated diff carries around each change.
const Context = 3

// diffLine is one line of a line diff: op is ' ', '-' or '+'; text keeps
// its line ending.
type diffLine struct {
	op   byte
	text []byte
}

// lineDiff diffs a and b line by line (go-diff's Myers diff over lines).
// The lines the two share at the start and at the end are set aside first,
// so go-diff maps and diffs only the lines between (a hunk's change in a
// 250 KB file is a few lines); the answer is the one go-diff gives on the
// whole texts, because go-diff sets those lines aside itself, except that it
// may then slide an edit as long as them into them, and there it is asked
// about the whole texts.
func lineDiff(a, b []byte) []diffLine {
	la, lb := SplitKeep(a), SplitKeep(b)
	p := 0
	for p < len(la) && p < len(lb) && bytes.Equal(la[p], lb[p]) {
		p++
	}
	s := 0
	for s < len(la)-p && s < len(lb)-p && bytes.Equal(la[len(la)-1-s], lb[len(lb)-1-s]) {
		s++
	}
	if p == 0 && s == 0 {
		return lineDiffWhole(a, b)
	}
	startA, startB := lenLines(la[:p]), lenLines(lb[:p])
	endA, endB := len(a)-lenLines(la[len(la)-s:]), len(b)-lenLines(lb[len(lb)-s:])
	mid := lineDiffWhole(a[startA:endA], b[startB:endB])
	lead, trail := 0, 0
	for lead < len(mid) && mid[lead].op != ' ' {
		lead++
	}
	for trail < len(mid) && mid[len(mid)-1-trail].op != ' ' {
		trail++
	}
	if (p > 0 && lead >= p) || (s > 0 && trail >= s) {
		return lineDiffWhole(a, b)
	}
	out := make([]diffLine, 0, p+len(mid)+s)
	for _, l := range la[:p] {
		out = append(out, diffLine{' ', l})
	}
	out = append(out, mid...)
	for _, l := range la[len(la)-s:] {
		out = append(out, diffLine{' ', l})
	}
	return out
}

func lenLines(ls [][]byte) int {
	n := 0
	for _, l := range ls {
		n += len(l)
	}
	return n
}

// lineDiffWhole is go-diff's line diff of a and b as they are.
func lineDiffWhole(a, b []byte) []diffLine {
	dmp := diffmatchpatch.New()
	ca, cb, lines := dmp.DiffLinesToChars(string(a), string(b))
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), lines)
	var out []diffLine
	for _, d := range diffs {
		op := byte(' ')
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			op = '-'
		case diffmatchpatch.DiffInsert:
			op = '+'
		}
		for _, l := range SplitKeep([]byte(d.Text)) {
			out = append(out, diffLine{op, l})
		}
	}
	return out
}

// Hunks turns the line diff of a and b into hunks with ctx lines of
// context, in the shape Parse produces (lines without their endings).
func Hunks(a, b []byte, ctx int) []*Hunk {
	dl := lineDiff(a, b)
	type pos struct{ o, n int }
	ps := make([]pos, len(dl))
	oldLine, newLine := 1, 1
	for i, d := range dl {
		ps[i] = pos{oldLine, newLine}
		if d.op != '+' {
			oldLine++
		}
		if d.op != '-' {
			newLine++
		}
	}
	var hunks []*Hunk
	for i := 0; i < len(dl); {
		if dl[i].op == ' ' {
			i++
			continue
		}
		start, end := max(0, i-ctx), i
		// Changes closer than 2*ctx lines share a hunk.
		for end < len(dl) {
			if dl[end].op != ' ' {
				end++
				continue
			}
			run := end
			for run < len(dl) && dl[run].op == ' ' {
				run++
			}
			if run < len(dl) && run-end <= 2*ctx {
				end = run
				continue
			}
			end = min(len(dl), end+ctx)
			break
		}
		h := &Hunk{OldStart: ps[start].o, NewStart: ps[start].n}
		for _, d := range dl[start:end] {
			h.Lines = append(h.Lines, string(bytes.TrimSuffix(d.text, []byte("\n"))))
			h.Ops = append(h.Ops, d.op)
			if d.op != '+' {
				h.OldLines++
			}
			if d.op != '-' {
				h.NewLines++
			}
			if !bytes.HasSuffix(d.text, []byte("\n")) {
				h.NoNewlineOld = h.NoNewlineOld || d.op != '+'
				h.NoNewlineNew = h.NoNewlineNew || d.op != '-'
			}
		}
		// An empty side is numbered from the line before it (0 for an
		// empty file), as diff -u and git do.
		if h.OldLines == 0 {
			h.OldStart--
		}
		if h.NewLines == 0 {
			h.NewStart--
		}
		hunks = append(hunks, h)
		i = end
	}
	return hunks
}

// Unified is the git-style diff of one file from old to nw, with Context
// lines of context. existed and keeps say whether the file exists before
// and after.
func Unified(path string, old, nw []byte, existed, keeps bool) []byte {
	fd := &FileDiff{OldPath: path, NewPath: path}
	if !existed {
		fd.OldPath = ""
	}
	if !keeps {
		fd.NewPath = ""
	}
	fd.Hunks = Hunks(old, nw, Context)
	return fd.Format()
}

// Between is Unified where nil means absent; nil when a and b are the
// same.
func Between(path string, a, b []byte) []byte {
	if (a == nil) == (b == nil) && bytes.Equal(a, b) {
		return nil
	}
	return Unified(path, a, b, a != nil, b != nil)
}

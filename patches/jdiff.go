package patches

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// udLine is one line of a line-level diff: op is ' ', '-' or '+'; text
// keeps its line ending.
type udLine struct {
	op   byte
	text string
}

// udSplit splits b into lines, each keeping its "\n".
func udSplit(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// udLineDiff diffs a and b line by line with go-diff.
func udLineDiff(a, b []byte) []udLine {
	dmp := diffmatchpatch.New()
	ca, cb, lines := dmp.DiffLinesToChars(string(a), string(b))
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), lines)
	var out []udLine
	for _, d := range diffs {
		op := byte(' ')
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			op = '-'
		case diffmatchpatch.DiffInsert:
			op = '+'
		}
		for _, l := range udSplit(d.Text) {
			out = append(out, udLine{op, l})
		}
	}
	return out
}

// udHunks turns a line diff into hunks with ctx lines of context, in the
// shape ParseDiff produces (lines without their line endings).
func udHunks(a, b []byte, ctx int) []*Hunk {
	dl := udLineDiff(a, b)
	var hunks []*Hunk
	oldLine, newLine := 1, 1
	// positions of each entry in old/new numbering
	type pos struct{ o, n int }
	ps := make([]pos, len(dl))
	for i, d := range dl {
		ps[i] = pos{oldLine, newLine}
		switch d.op {
		case ' ':
			oldLine++
			newLine++
		case '-':
			oldLine++
		case '+':
			newLine++
		}
	}
	i := 0
	for i < len(dl) {
		if dl[i].op == ' ' {
			i++
			continue
		}
		start := max(0, i-ctx)
		end := i
		// extend while changes are within 2*ctx of each other
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
			text := strings.TrimSuffix(d.text, "\n")
			h.Lines = append(h.Lines, text)
			h.Ops = append(h.Ops, d.op)
			switch d.op {
			case ' ':
				h.OldLines++
				h.NewLines++
			case '-':
				h.OldLines++
			case '+':
				h.NewLines++
			}
		}
		// "\ No newline at end of file"
		for k := start; k < end; k++ {
			if strings.HasSuffix(dl[k].text, "\n") {
				continue
			}
			switch dl[k].op {
			case ' ':
				h.NoNewlineOld, h.NoNewlineNew = true, true
			case '-':
				h.NoNewlineOld = true
			case '+':
				h.NoNewlineNew = true
			}
		}
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

// udFile renders a git-style unified diff of one file from a to b
// (nil means absent). It returns nil when a and b are equal.
func udFile(path string, a, b []byte) []byte {
	if (a == nil) == (b == nil) && bytes.Equal(a, b) {
		return nil
	}
	var w bytes.Buffer
	fmt.Fprintf(&w, "diff --git a/%s b/%s\n", path, path)
	switch {
	case a == nil:
		fmt.Fprintf(&w, "--- /dev/null\n+++ b/%s\n", path)
	case b == nil:
		fmt.Fprintf(&w, "--- a/%s\n+++ /dev/null\n", path)
	default:
		fmt.Fprintf(&w, "--- a/%s\n+++ b/%s\n", path, path)
	}
	for _, h := range udHunks(a, b, 3) {
		fmt.Fprintf(&w, "@@ -%s +%s @@\n", udRange(h.OldStart, h.OldLines), udRange(h.NewStart, h.NewLines))
		lastOld, lastNew := -1, -1
		for k, op := range h.Ops {
			if op != '+' {
				lastOld = k
			}
			if op != '-' {
				lastNew = k
			}
		}
		for k, l := range h.Lines {
			w.WriteByte(h.Ops[k])
			w.WriteString(l)
			w.WriteByte('\n')
			if (h.NoNewlineOld && k == lastOld && h.Ops[k] == '-') ||
				(h.NoNewlineNew && k == lastNew && h.Ops[k] == '+') ||
				(h.NoNewlineOld && h.NoNewlineNew && k == lastOld && k == lastNew && h.Ops[k] == ' ') {
				w.WriteString("\\ No newline at end of file\n")
			}
		}
	}
	return w.Bytes()
}

func udRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

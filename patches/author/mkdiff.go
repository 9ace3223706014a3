package author

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/smpatch/smpatch/patches/udiff"
)

// Change is one file a patch changes: its bytes before (nil: the change
// creates it) and after (nil: the change deletes it).
type Change struct {
	Path     string
	Old, New []byte
}

// maxContext is the most context a hunk gets on one side while it is not
// yet unique in its file.
const maxContext = 6

// MakeDiff writes the changes as one git-style diff with the context the
// built-in patches keep: each change with the fewest lines around it that
// place it once in its file (one line each side when that is enough; a
// blank or punctuation-only line next to a change is never the only
// anchor). Context that is not needed is context that upstream can change
// between releases, so the diff applies on more of them. Files are in
// path order.
func MakeDiff(changes []Change) []byte {
	sorted := append([]Change(nil), changes...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var b bytes.Buffer
	for _, c := range sorted {
		fd := &udiff.FileDiff{OldPath: c.Path, NewPath: c.Path}
		switch {
		case c.Old == nil:
			fd.OldPath = ""
			fd.Hunks = udiff.Hunks(nil, c.New, 0)
		case c.New == nil:
			fd.NewPath = ""
			fd.Hunks = udiff.Hunks(c.Old, nil, 0)
		default:
			fd.Hunks = minimalHunks(c.Old, c.New)
			if pythonFile(c.Path) {
				lines := splitLines(c.Old)
				for _, h := range fd.Hunks {
					h.Section = pySection(lines, h)
				}
			}
		}
		if len(fd.Hunks) == 0 && !fd.IsCreate() && !fd.IsDelete() {
			continue
		}
		b.Write(fd.Format())
	}
	return b.Bytes()
}

// minimalHunks are the hunks from old to nw, each with the least context
// that makes its old side unique in old.
func minimalHunks(old, nw []byte) []*udiff.Hunk {
	hs := udiff.Hunks(old, nw, 1)
	lines := splitLines(old)
	noEOL := len(old) > 0 && old[len(old)-1] != '\n'
	for i, h := range hs {
		low := 0 // index of the first old line this hunk may take
		if i > 0 {
			p := hs[i-1]
			low = p.OldStart - 1 + p.OldLines + 1
		}
		high := len(lines) // one past the last old line it may take
		if i+1 < len(hs) {
			high = hs[i+1].OldStart - 1 - 1
		}
		grow(h, lines, low, high, noEOL)
	}
	return hs
}

// grow adds context lines of old (lines) to h, before and after, while its
// old side is not unique or the line next to a change is weak, staying in
// [low, high).
func grow(h *udiff.Hunk, lines []string, low, high int, noEOL bool) {
	for {
		before, after := leading(h), trailing(h)
		needBefore := before < maxContext && (before == 0 || weak(h.Lines[0])) && h.OldStart-2 >= low
		needAfter := after < maxContext && (after == 0 || weak(h.Lines[len(h.Lines)-1])) && h.OldStart-1+h.OldLines < high
		unique := count(lines, oldSide(h)) <= 1
		if unique && !needBefore && !needAfter {
			return
		}
		grew := false
		if needBefore || (!unique && before < maxContext && h.OldStart-2 >= low) {
			if h.OldLines == 0 {
				h.OldStart++ // an empty side is numbered from the line before it
			}
			if h.NewLines == 0 {
				h.NewStart++
			}
			h.Lines = append([]string{lines[h.OldStart-2]}, h.Lines...)
			h.Ops = append([]byte{' '}, h.Ops...)
			h.OldStart--
			h.NewStart--
			h.OldLines++
			h.NewLines++
			grew = true
		}
		if needAfter || (!unique && after < maxContext && h.OldStart-1+h.OldLines < high) {
			idx := h.OldStart - 1 + h.OldLines
			if h.OldLines == 0 {
				h.OldStart++
			}
			if h.NewLines == 0 {
				h.NewStart++
			}
			h.Lines = append(h.Lines, lines[idx])
			h.Ops = append(h.Ops, ' ')
			h.OldLines++
			h.NewLines++
			if idx == len(lines)-1 && noEOL {
				h.NoNewlineOld, h.NoNewlineNew = true, true
			}
			grew = true
		}
		if !grew {
			return
		}
	}
}

func leading(h *udiff.Hunk) int {
	n := 0
	for n < len(h.Ops) && h.Ops[n] == ' ' {
		n++
	}
	return n
}

func trailing(h *udiff.Hunk) int {
	n := 0
	for n < len(h.Ops) && h.Ops[len(h.Ops)-1-n] == ' ' {
		n++
	}
	return n
}

// weak reports whether a context line says nothing about its place: blank,
// or only brackets and punctuation.
func weak(l string) bool {
	return !strings.ContainsFunc(l, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) })
}

func oldSide(h *udiff.Hunk) []string {
	var out []string
	for i, op := range h.Ops {
		if op != '+' {
			out = append(out, h.Lines[i])
		}
	}
	return out
}

// count is how many times seq occurs in lines (stopping at 2).
func count(lines, seq []string) int {
	if len(seq) == 0 {
		return 2
	}
	n := 0
	for i := 0; i+len(seq) <= len(lines); i++ {
		if lines[i] != seq[0] {
			continue
		}
		ok := true
		for k := 1; k < len(seq); k++ {
			if lines[i+k] != seq[k] {
				ok = false
				break
			}
		}
		if ok {
			if n++; n >= 2 {
				return n
			}
		}
	}
	return n
}

// splitLines splits data into lines without their "\n" (a '\r' stays, as
// udiff keeps it).
func splitLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	s := strings.TrimSuffix(string(data), "\n")
	return strings.Split(s, "\n")
}

// checkDiff parses diff and applies it to each change's old bytes: every
// file must come out with exactly its new bytes.
func checkDiff(src string, diff []byte, changes []Change) error {
	fds, err := udiff.Parse(src, diff)
	if err != nil {
		return err
	}
	want := map[string]Change{}
	for _, c := range changes {
		want[c.Path] = c
	}
	if len(fds) != len(want) {
		return fmt.Errorf("%s: %d files in the diff, %d changed", src, len(fds), len(want))
	}
	for _, fd := range fds {
		c, ok := want[fd.Path()]
		if !ok {
			return fmt.Errorf("%s: %s is not a changed file", src, fd.Path())
		}
		r := udiff.Match(c.Old, fd)
		if r.Conflicts() {
			return fmt.Errorf("%s: %s: the diff does not apply to its own base", src, fd.Path())
		}
		if fd.IsDelete() != (c.New == nil) || !fd.IsDelete() && !bytes.Equal(r.New, c.New) {
			return fmt.Errorf("%s: %s: the diff does not reproduce the changed file", src, fd.Path())
		}
	}
	return nil
}

// maxSectionScan bounds how far back a hunk's enclosing def or class is
// looked for.
const maxSectionScan = 20000

// maxSection is the most bytes of a hunk header's context (git's limit).
const maxSection = 80

var pyDef = regexp.MustCompile(`^[ \t]*((?:async[ \t]+)?def[ \t]|class[ \t])`)

func pythonFile(p string) bool {
	switch path.Ext(p) {
	case ".py", ".pyi":
		return true
	}
	return false
}

// pySection is the context git writes after a Python hunk's "@@": the
// nearest "def " or "class " line before the hunk that is indented less
// than every line of the hunk (its enclosing function or class, through
// the if, for or with blocks between), without its indentation, at most 80
// bytes; "" when the hunk is at the top level or under a top-level
// statement that is not a def or class.
func pySection(lines []string, h *udiff.Hunk) string {
	ind := -1
	for _, l := range h.Lines {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		if n := indentOf(l); ind < 0 || n < ind {
			ind = n
		}
	}
	if ind <= 0 {
		return ""
	}
	from := h.OldStart - 1 // index of the hunk's first old line
	if h.OldLines == 0 {
		from = h.OldStart
	}
	for i := min(from, len(lines)) - 1; i >= 0 && from-i <= maxSectionScan; i-- {
		l := strings.TrimRight(lines[i], "\r")
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") || indentOf(l) >= ind {
			continue
		}
		if !pyDef.MatchString(l) {
			// An enclosing block (if, for, with): its own block may be a
			// function's; a top-level statement ends the search.
			if ind = indentOf(l); ind == 0 {
				return ""
			}
			continue
		}
		s := strings.TrimSpace(l)
		if len(s) > maxSection {
			s = s[:maxSection]
			for len(s) > 0 && !utf8.ValidString(s) {
				s = s[:len(s)-1]
			}
		}
		return s
	}
	return ""
}

// indentOf is the count of leading spaces and tabs of l.
func indentOf(l string) int {
	return len(l) - len(strings.TrimLeft(l, " \t"))
}

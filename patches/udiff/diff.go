package udiff

import (
	"bytes"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// FileDiff is one file's section of a unified diff.
type FileDiff struct {
	OldPath string // repository-relative, "a/" stripped; "" for /dev/null
	NewPath string // repository-relative, "b/" stripped; "" for /dev/null
	Hunks   []*Hunk
	// Source and Line locate the "diff --git" (or "---") line for errors.
	Source string
	Line   int
	// OldMode and NewMode are git's file modes when the header states them
	// ("100644"); informational only.
	OldMode, NewMode string
}

// Hunk is one @@ section.
type Hunk struct {
	OldStart, OldLines int
	NewStart, NewLines int
	Section            string // text after the closing @@
	// Lines are the body lines without their leading ' ', '-' or '+' and
	// without line endings; Ops holds that leading byte for each.
	// A carriage return before the newline is kept in the line.
	Lines []string
	Ops   []byte
	// NoNewlineOld/New record "\ No newline at end of file" after the last
	// old or new line.
	NoNewlineOld, NoNewlineNew bool
	Line                       int // line of the @@ header in Source
	// Source is the diff file the hunk was read from (a file plan that
	// composes several diffs of one file holds hunks of each).
	Source string
}

// Path is the path the diff changes: the new path, or the old one for a
// deleted file.
func (fd *FileDiff) Path() string {
	if fd.NewPath != "" {
		return fd.NewPath
	}
	return fd.OldPath
}

// IsCreate reports whether the diff creates its file.
func (fd *FileDiff) IsCreate() bool { return fd.OldPath == "" }

// IsDelete reports whether the diff deletes its file.
func (fd *FileDiff) IsDelete() bool { return fd.NewPath == "" }

// Parse parses an ordinary unified diff (git diff output, or diff -u)
// into its files. src names the input in errors ("src:line: ..."). Text
// before the first file (a commit message) is ignored. Hunk line counts must
// agree with the bodies; absolute paths, ".." and renames are rejected.
func Parse(src string, data []byte) ([]*FileDiff, error) {
	p := &diffParser{src: src, lines: SplitKeep(data)}
	return p.parse()
}

type diffParser struct {
	src   string
	lines [][]byte // each with its "\n" if it had one
	i     int      // index of the next line
}

func (p *diffParser) errf(line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.src, line, fmt.Sprintf(format, args...))
}

// header returns line i without its line ending (and a trailing '\r').
func (p *diffParser) header(i int) string {
	s := string(p.lines[i])
	s = strings.TrimSuffix(s, "\n")
	return strings.TrimSuffix(s, "\r")
}

func (p *diffParser) parse() ([]*FileDiff, error) {
	var files []*FileDiff
	for p.i < len(p.lines) {
		h := p.header(p.i)
		switch {
		case strings.HasPrefix(h, "diff --git "):
			fd, err := p.parseGitFile()
			if err != nil {
				return nil, err
			}
			files = append(files, fd)
		case strings.HasPrefix(h, "--- ") && p.i+1 < len(p.lines) && strings.HasPrefix(p.header(p.i+1), "+++ "):
			fd := &FileDiff{Source: p.src, Line: p.i + 1}
			if err := p.parsePaths(fd); err != nil {
				return nil, err
			}
			if err := p.parseHunks(fd); err != nil {
				return nil, err
			}
			if len(fd.Hunks) == 0 {
				return nil, p.errf(fd.Line, "%s: no hunks", fd.Path())
			}
			files = append(files, fd)
		case strings.HasPrefix(h, "@@ "):
			return nil, p.errf(p.i+1, "hunk outside a file (no --- and +++ lines before it)")
		default:
			p.i++
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no file diffs found", p.src)
	}
	seen := map[string]int{}
	for _, fd := range files {
		if l, ok := seen[fd.Path()]; ok {
			return nil, p.errf(fd.Line, "%s: second diff for the same file (first at line %d)", fd.Path(), l)
		}
		seen[fd.Path()] = fd.Line
	}
	return files, nil
}

// parseGitFile parses a "diff --git" section: extended header lines, then
// optional --- / +++ lines and hunks.
func (p *diffParser) parseGitFile() (*FileDiff, error) {
	fd := &FileDiff{Source: p.src, Line: p.i + 1}
	oldP, newP, err := gitHeaderPaths(strings.TrimPrefix(p.header(p.i), "diff --git "))
	if err != nil {
		return nil, p.errf(fd.Line, "%v", err)
	}
	p.i++
	var created, deleted bool
	for p.i < len(p.lines) {
		h := p.header(p.i)
		switch {
		case strings.HasPrefix(h, "index "), strings.HasPrefix(h, "similarity index "), strings.HasPrefix(h, "dissimilarity index "):
		case strings.HasPrefix(h, "old mode "):
			fd.OldMode = strings.TrimPrefix(h, "old mode ")
		case strings.HasPrefix(h, "new mode "):
			fd.NewMode = strings.TrimPrefix(h, "new mode ")
		case strings.HasPrefix(h, "new file mode "):
			created = true
			fd.NewMode = strings.TrimPrefix(h, "new file mode ")
		case strings.HasPrefix(h, "deleted file mode "):
			deleted = true
			fd.OldMode = strings.TrimPrefix(h, "deleted file mode ")
		case strings.HasPrefix(h, "rename from "), strings.HasPrefix(h, "rename to "),
			strings.HasPrefix(h, "copy from "), strings.HasPrefix(h, "copy to "):
			return nil, p.errf(p.i+1, "renames and copies are not supported")
		case strings.HasPrefix(h, "Binary files "), h == "GIT binary patch":
			return nil, p.errf(p.i+1, "binary diffs are not supported")
		default:
			goto body
		}
		p.i++
	}
body:
	if p.i < len(p.lines) && strings.HasPrefix(p.header(p.i), "--- ") {
		if p.i+1 >= len(p.lines) || !strings.HasPrefix(p.header(p.i+1), "+++ ") {
			return nil, p.errf(p.i+1, "--- line without a +++ line")
		}
		if err := p.parsePaths(fd); err != nil {
			return nil, err
		}
		if err := p.parseHunks(fd); err != nil {
			return nil, err
		}
		if len(fd.Hunks) == 0 {
			return nil, p.errf(fd.Line, "%s: no hunks", fd.Path())
		}
	} else {
		// Header only: an empty new or deleted file, or a mode change.
		fd.OldPath, fd.NewPath = oldP, newP
		if created {
			fd.OldPath = ""
		}
		if deleted {
			fd.NewPath = ""
		}
		if err := p.checkPath(fd.Line, fd.OldPath); err != nil {
			return nil, err
		}
		if err := p.checkPath(fd.Line, fd.NewPath); err != nil {
			return nil, err
		}
	}
	if fd.OldPath != "" && fd.NewPath != "" && fd.OldPath != fd.NewPath {
		return nil, p.errf(fd.Line, "renames are not supported (%s -> %s)", fd.OldPath, fd.NewPath)
	}
	if created && fd.OldPath != "" || deleted && fd.NewPath != "" {
		return nil, p.errf(fd.Line, "%s: header says new or deleted file, but --- / +++ disagree", fd.Path())
	}
	return fd, nil
}

// gitHeaderPaths splits "a/x b/x" (possibly quoted) into its two paths.
func gitHeaderPaths(s string) (string, string, error) {
	var parts []string
	rest := s
	for len(parts) < 2 && rest != "" {
		if rest[0] == '"' {
			end := 1
			for end < len(rest) && rest[end] != '"' {
				if rest[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(rest) {
				return "", "", fmt.Errorf("unterminated quoted path in diff --git header")
			}
			u, err := unquoteGitPath(rest[:end+1])
			if err != nil {
				return "", "", err
			}
			parts = append(parts, u)
			rest = strings.TrimLeft(rest[end+1:], " ")
			continue
		}
		if len(parts) == 0 {
			// Unquoted: the paths are equal for a plain change, so split in the middle.
			if i := strings.Index(rest, " b/"); i >= 0 {
				parts = append(parts, rest[:i])
				rest = rest[i+1:]
				continue
			}
			i := strings.IndexByte(rest, ' ')
			if i < 0 {
				return "", "", fmt.Errorf("malformed diff --git header %q", s)
			}
			parts = append(parts, rest[:i])
			rest = rest[i+1:]
			continue
		}
		parts = append(parts, rest)
		rest = ""
	}
	if len(parts) != 2 {
		return "", "", fmt.Errorf("malformed diff --git header %q", s)
	}
	return strings.TrimPrefix(parts[0], "a/"), strings.TrimPrefix(parts[1], "b/"), nil
}

func unquoteGitPath(q string) (string, error) {
	u, err := strconv.Unquote(q)
	if err != nil {
		return "", fmt.Errorf("bad quoted path %s", q)
	}
	return u, nil
}

// diffPath reads the path of a --- or +++ line: "" for /dev/null, prefix
// ("a/" or "b/") stripped, a tab-separated timestamp dropped.
func diffPath(s, prefix string) (string, error) {
	if strings.HasPrefix(s, "\"") {
		end := 1
		for end < len(s) && s[end] != '"' {
			if s[end] == '\\' {
				end++
			}
			end++
		}
		if end >= len(s) {
			return "", fmt.Errorf("unterminated quoted path %s", s)
		}
		u, err := unquoteGitPath(s[:end+1])
		if err != nil {
			return "", err
		}
		s = u
	} else if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimRight(s, " ")
	if s == "/dev/null" {
		return "", nil
	}
	return strings.TrimPrefix(s, prefix), nil
}

func (p *diffParser) checkPath(line int, rel string) error {
	if rel == "" {
		return nil
	}
	switch {
	case strings.HasPrefix(rel, "/") || strings.HasPrefix(rel, `\`) || (len(rel) > 1 && rel[1] == ':'):
		return p.errf(line, "path %q is absolute; diffs must use repository-relative paths", rel)
	case strings.ContainsRune(rel, 0):
		return p.errf(line, "path %q contains a NUL byte", rel)
	}
	for _, seg := range strings.Split(rel, "/") {
		if seg == ".." {
			return p.errf(line, "path %q leaves the tree (..)", rel)
		}
	}
	if c := path.Clean(rel); c == "." || c != rel {
		return p.errf(line, "path %q is not clean (want %q)", rel, c)
	}
	return nil
}

// parsePaths reads the --- and +++ lines at p.i.
func (p *diffParser) parsePaths(fd *FileDiff) error {
	oldLine, newLine := p.i+1, p.i+2
	oldP, err := diffPath(strings.TrimPrefix(p.header(p.i), "--- "), "a/")
	if err != nil {
		return p.errf(oldLine, "%v", err)
	}
	newP, err := diffPath(strings.TrimPrefix(p.header(p.i+1), "+++ "), "b/")
	if err != nil {
		return p.errf(newLine, "%v", err)
	}
	if oldP == "" && newP == "" {
		return p.errf(oldLine, "both sides are /dev/null")
	}
	if err := p.checkPath(oldLine, oldP); err != nil {
		return err
	}
	if err := p.checkPath(newLine, newP); err != nil {
		return err
	}
	fd.OldPath, fd.NewPath = oldP, newP
	if oldP != "" && newP != "" && oldP != newP {
		return p.errf(oldLine, "renames are not supported (%s -> %s)", oldP, newP)
	}
	p.i += 2
	return nil
}

// parseHunks reads consecutive @@ sections at p.i.
func (p *diffParser) parseHunks(fd *FileDiff) error {
	for p.i < len(p.lines) && strings.HasPrefix(p.header(p.i), "@@ ") {
		h, err := p.parseHunk()
		if err != nil {
			return err
		}
		if fd.IsCreate() && (h.OldLines != 0 || h.OldStart != 0) {
			return p.errf(h.Line, "hunk of new file %s must start at -0,0", fd.Path())
		}
		if fd.IsDelete() && (h.NewLines != 0 || h.NewStart != 0) {
			return p.errf(h.Line, "hunk of deleted file %s must end at +0,0", fd.Path())
		}
		if n := len(fd.Hunks); n > 0 {
			prev := fd.Hunks[n-1]
			if h.OldStart < prev.OldStart+prev.OldLines {
				return p.errf(h.Line, "hunk overlaps or precedes the previous hunk (line %d)", prev.Line)
			}
		}
		h.Source = fd.Source
		fd.Hunks = append(fd.Hunks, h)
	}
	return nil
}

// parseRange reads "a,b" or "a" (count 1).
func parseRange(s string) (start, count int, ok bool) {
	a, b, hasComma := strings.Cut(s, ",")
	start, err := strconv.Atoi(a)
	if err != nil || start < 0 || a == "" || a[0] == '+' {
		return 0, 0, false
	}
	count = 1
	if hasComma {
		count, err = strconv.Atoi(b)
		if err != nil || count < 0 || b == "" || b[0] == '+' {
			return 0, 0, false
		}
	}
	if start > 1<<30 || count > 1<<30 {
		return 0, 0, false
	}
	return start, count, true
}

func (p *diffParser) parseHunk() (*Hunk, error) {
	line := p.i + 1
	hdr := p.header(p.i)
	rest, ok := strings.CutPrefix(hdr, "@@ -")
	var oldR, newR, section string
	if ok {
		var found bool
		oldR, rest, found = strings.Cut(rest, " +")
		if found {
			newR, section, found = strings.Cut(rest, " @@")
		}
		ok = found
	}
	h := &Hunk{Line: line}
	if ok {
		var ok1, ok2 bool
		h.OldStart, h.OldLines, ok1 = parseRange(oldR)
		h.NewStart, h.NewLines, ok2 = parseRange(newR)
		ok = ok1 && ok2
	}
	if !ok {
		return nil, p.errf(line, "malformed hunk header %q", hdr)
	}
	h.Section = strings.TrimPrefix(section, " ")
	if h.OldLines > 0 && h.OldStart == 0 || h.NewLines > 0 && h.NewStart == 0 {
		return nil, p.errf(line, "malformed hunk header %q: a non-empty side starts at line 0", hdr)
	}
	p.i++
	oldN, newN := 0, 0
	for oldN < h.OldLines || newN < h.NewLines {
		if p.i >= len(p.lines) {
			return nil, p.errf(line, "hunk body ends early: header says -%d +%d lines, body has -%d +%d", h.OldLines, h.NewLines, oldN, newN)
		}
		raw := p.lines[p.i]
		body := bytes.TrimSuffix(raw, []byte("\n"))
		if len(body) == 0 || (len(body) == 1 && body[0] == '\r') {
			// An empty line in a body is a context line whose space was
			// stripped by an editor.
			body = append([]byte{' '}, body...)
		}
		op := body[0]
		switch op {
		case ' ', '-', '+':
		case '\\':
			if err := p.noNewline(h, line); err != nil {
				return nil, err
			}
			p.i++
			continue
		default:
			return nil, p.errf(p.i+1, "hunk body ends early: header at line %d says -%d +%d lines, body has -%d +%d", line, h.OldLines, h.NewLines, oldN, newN)
		}
		if op != '+' {
			oldN++
		}
		if op != '-' {
			newN++
		}
		if oldN > h.OldLines || newN > h.NewLines {
			return nil, p.errf(p.i+1, "hunk body longer than its header (line %d) says: -%d +%d", line, h.OldLines, h.NewLines)
		}
		h.Ops = append(h.Ops, op)
		h.Lines = append(h.Lines, string(body[1:]))
		p.i++
	}
	// A "\ No newline" marker may follow the last line.
	if p.i < len(p.lines) && len(p.lines[p.i]) > 0 && p.lines[p.i][0] == '\\' {
		if err := p.noNewline(h, line); err != nil {
			return nil, err
		}
		p.i++
	}
	// Lines of a body beyond the counts are a count mismatch, not trailing text.
	if p.i < len(p.lines) {
		b := p.header(p.i)
		isSignature := b == "-- " // git format-patch trailer
		if len(b) > 0 && (b[0] == '+' || b[0] == '-' || b[0] == ' ') && !strings.HasPrefix(b, "--- ") && !isSignature {
			return nil, p.errf(p.i+1, "hunk body longer than its header (line %d) says: -%d +%d", line, h.OldLines, h.NewLines)
		}
	}
	return h, nil
}

// noNewline records a "\ No newline at end of file" marker after the last body line.
func (p *diffParser) noNewline(h *Hunk, hdrLine int) error {
	if len(h.Ops) == 0 {
		return p.errf(p.i+1, "\"\\ No newline\" marker before any line of the hunk at line %d", hdrLine)
	}
	last := len(h.Ops) - 1
	switch h.Ops[last] {
	case '-':
		h.NoNewlineOld = true
	case '+':
		h.NoNewlineNew = true
	default:
		h.NoNewlineOld, h.NoNewlineNew = true, true
	}
	return nil
}

// Reverse returns the diff that undoes fd: sides swapped, '-' and '+'
// exchanged, each change block written removals first.
func (fd *FileDiff) Reverse() *FileDiff {
	r := &FileDiff{
		OldPath: fd.NewPath, NewPath: fd.OldPath,
		Source: fd.Source, Line: fd.Line,
		OldMode: fd.NewMode, NewMode: fd.OldMode,
	}
	for _, h := range fd.Hunks {
		rh := &Hunk{
			OldStart: h.NewStart, OldLines: h.NewLines,
			NewStart: h.OldStart, NewLines: h.OldLines,
			Section:      h.Section,
			NoNewlineOld: h.NoNewlineNew, NoNewlineNew: h.NoNewlineOld,
			Line: h.Line, Source: h.Source,
		}
		for i := 0; i < len(h.Ops); {
			if h.Ops[i] == ' ' {
				rh.Ops = append(rh.Ops, ' ')
				rh.Lines = append(rh.Lines, h.Lines[i])
				i++
				continue
			}
			j := i
			for j < len(h.Ops) && h.Ops[j] != ' ' {
				j++
			}
			for k := i; k < j; k++ { // old '+' become '-'
				if h.Ops[k] == '+' {
					rh.Ops = append(rh.Ops, '-')
					rh.Lines = append(rh.Lines, h.Lines[k])
				}
			}
			for k := i; k < j; k++ {
				if h.Ops[k] == '-' {
					rh.Ops = append(rh.Ops, '+')
					rh.Lines = append(rh.Lines, h.Lines[k])
				}
			}
			i = j
		}
		r.Hunks = append(r.Hunks, rh)
	}
	return r
}

// Format writes fd back as a git-style unified diff.
func (fd *FileDiff) Format() []byte {
	var b bytes.Buffer
	oldName, newName := "/dev/null", "/dev/null"
	if fd.OldPath != "" {
		oldName = "a/" + fd.OldPath
	}
	if fd.NewPath != "" {
		newName = "b/" + fd.NewPath
	}
	fmt.Fprintf(&b, "diff --git a/%s b/%s\n", fd.Path(), fd.Path())
	switch {
	case fd.IsCreate():
		fmt.Fprintf(&b, "new file mode %s\n", orDefault(fd.NewMode, "100644"))
	case fd.IsDelete():
		fmt.Fprintf(&b, "deleted file mode %s\n", orDefault(fd.OldMode, "100644"))
	case fd.OldMode != "" && fd.NewMode != "" && fd.OldMode != fd.NewMode:
		fmt.Fprintf(&b, "old mode %s\nnew mode %s\n", fd.OldMode, fd.NewMode)
	}
	if len(fd.Hunks) == 0 {
		return b.Bytes()
	}
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", oldName, newName)
	for _, h := range fd.Hunks {
		b.WriteString(hunkHeader(h.OldStart, h.OldLines, h.NewStart, h.NewLines, h.Section))
		lastOld, lastNew := -1, -1
		for i, op := range h.Ops {
			if op != '+' {
				lastOld = i
			}
			if op != '-' {
				lastNew = i
			}
		}
		for i, op := range h.Ops {
			b.WriteByte(op)
			b.WriteString(h.Lines[i])
			b.WriteByte('\n')
			if (h.NoNewlineOld && i == lastOld) || (h.NoNewlineNew && i == lastNew) {
				b.WriteString("\\ No newline at end of file\n")
			}
		}
	}
	return b.Bytes()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func hunkHeader(oldStart, oldLines, newStart, newLines int, section string) string {
	s := fmt.Sprintf("@@ -%s +%s @@", formatRange(oldStart, oldLines), formatRange(newStart, newLines))
	if section != "" {
		s += " " + section
	}
	return s + "\n"
}

func formatRange(start, count int) string {
	if count == 1 {
		return strconv.Itoa(start)
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(count)
}

// SplitKeep splits data into lines, each keeping its "\n"; a last line
// without one is kept as is.
func SplitKeep(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			out = append(out, data)
			break
		}
		out = append(out, data[:i+1])
		data = data[i+1:]
	}
	return out
}

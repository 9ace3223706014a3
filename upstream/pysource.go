package upstream

import (
	"sort"
	"strings"
)

// pySource is one Python file read for its names, never run: the text with
// the bodies of comments and string literals blanked (same length, newlines
// kept, so offsets and lines stay those of the file), cut into logical
// lines (a statement continued inside brackets or after a backslash is one
// line), each in the def or class that holds it.
type pySource struct {
	orig   []byte
	code   []byte
	starts []int // offset of every physical line
	lines  []pyLine
}

// pyLine is one logical line.
type pyLine struct {
	start, end int    // offsets in the file
	indent     int    // columns before its first character
	text       string // the code, continuation newlines as spaces, trimmed
	scope      int    // index of the innermost def or class line holding it, -1 at module level
	block      int    // index of the innermost line opening a block that holds it, -1 if none
}

// maxPySource is the largest Python file read; upstream's largest module is
// under 1 MB.
const maxPySource = 4 << 20

// newPySource reads src; a file over maxPySource is read as empty.
func newPySource(src []byte) *pySource {
	if len(src) > maxPySource {
		src = nil
	}
	s := &pySource{orig: src, code: blankPython(src)}
	s.starts = append(s.starts, 0)
	for i, c := range src {
		if c == '\n' {
			s.starts = append(s.starts, i+1)
		}
	}
	s.cutLines()
	return s
}

// line is the 1-based line of offset off.
func (s *pySource) line(off int) int {
	return sort.Search(len(s.starts), func(i int) bool { return s.starts[i] > off })
}

// blankPython blanks the bodies of comments and string literals of src:
// every byte inside them but a newline becomes a space; the quotes stay.
func blankPython(src []byte) []byte {
	out := make([]byte, len(src))
	copy(out, src)
	blank := func(i int) {
		if out[i] != '\n' {
			out[i] = ' '
		}
	}
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '#':
			for ; i < len(src) && src[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '"' || c == '\'':
			q := c
			triple := i+2 < len(src) && src[i+1] == q && src[i+2] == q
			if triple {
				i += 3
			} else {
				i++
			}
			for i < len(src) {
				switch {
				case src[i] == '\\' && i+1 < len(src):
					blank(i)
					blank(i + 1)
					i += 2
					continue
				case triple && src[i] == q && i+2 < len(src) && src[i+1] == q && src[i+2] == q:
					i += 3
				case !triple && src[i] == q:
					i++
				case !triple && src[i] == '\n':
					// An unterminated literal ends at the line's end.
				default:
					blank(i)
					i++
					continue
				}
				break
			}
		default:
			i++
		}
	}
	return out
}

// cutLines splits the blanked code into logical lines and records the
// block (and the def or class) that holds each.
func (s *pySource) cutLines() {
	code := s.code
	depth, start := 0, 0
	type open struct{ indent, line int }
	var blocks []open
	flush := func(end int) {
		raw := string(code[start:end])
		text := strings.TrimSpace(strings.NewReplacer("\\\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(raw))
		if text != "" {
			ind := 0
			for _, c := range raw {
				if c == ' ' {
					ind++
				} else if c == '\t' {
					ind += 8 - ind%8
				} else if c == '\n' || c == '\r' {
					ind = 0
				} else {
					break
				}
			}
			for len(blocks) > 0 && blocks[len(blocks)-1].indent >= ind {
				blocks = blocks[:len(blocks)-1]
			}
			l := pyLine{start: start, end: end, indent: ind, text: text, scope: -1, block: -1}
			if len(blocks) > 0 {
				l.block = blocks[len(blocks)-1].line
			}
			for k := len(blocks) - 1; k >= 0; k-- {
				if isScope(s.lines[blocks[k].line].text) {
					l.scope = blocks[k].line
					break
				}
			}
			if isScope(text) || strings.HasSuffix(text, ":") {
				blocks = append(blocks, open{ind, len(s.lines)})
			}
			s.lines = append(s.lines, l)
		}
		start = end + 1
	}
	for i := 0; i < len(code); i++ {
		switch code[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth > 0 {
				depth--
			}
		case '\n':
			if depth == 0 && !(i > 0 && code[i-1] == '\\') {
				flush(i)
			}
		}
	}
	if start < len(code) {
		flush(len(code))
	}
}

// isScope reports whether a logical line opens a def or a class.
func isScope(text string) bool {
	kw := firstWord(text)
	return kw == "def" || kw == "class" || kw == "async" && strings.HasPrefix(text, "async def")
}

// inTry reports whether line i runs inside a try block of its own def (or
// of the module).
func (s *pySource) inTry(i int) bool {
	for j := s.lines[i].block; j >= 0; j = s.lines[j].block {
		t := s.lines[j].text
		if isScope(t) {
			return false
		}
		if firstWord(t) == "try" {
			return true
		}
	}
	return false
}

// firstWord is the identifier text starts with.
func firstWord(text string) string {
	i := 0
	for i < len(text) && isIdent(text[i]) {
		i++
	}
	return text[:i]
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isIdentStart(c byte) bool { return isIdent(c) && (c < '0' || c > '9') }

// inScope reports whether logical line i is inside the def or class of
// line d (at any depth).
func (s *pySource) inScope(i, d int) bool {
	for j := s.lines[i].scope; j >= 0; j = s.lines[j].scope {
		if j == d {
			return true
		}
	}
	return false
}

// enclosingDef is the innermost def holding line i, -1 at module level or
// directly in a class.
func (s *pySource) enclosingDef(i int) int {
	for j := s.lines[i].scope; j >= 0; j = s.lines[j].scope {
		if strings.HasPrefix(s.lines[j].text, "def ") || strings.HasPrefix(s.lines[j].text, "async def ") {
			return j
		}
	}
	return -1
}

// lineAt is the index of the logical line holding offset off, -1 if none.
func (s *pySource) lineAt(off int) int {
	i := sort.Search(len(s.lines), func(i int) bool { return s.lines[i].end >= off })
	if i < len(s.lines) && s.lines[i].start <= off {
		return i
	}
	return -1
}

// parenEnd is the offset just past the bracket that closes the one at
// open in the blanked code, or -1 when it is not closed.
func parenEnd(code []byte, open int) int {
	depth := 0
	for i := open; i < len(code); i++ {
		switch code[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// splitTop splits s at the commas outside brackets.
func splitTop(s string) []string {
	var out []string
	depth, from := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[from:i])
				from = i + 1
			}
		}
	}
	return append(out, s[from:])
}

// cutTop cuts s at the first sep outside brackets; "==", "<=", ">=", "!="
// are not an "=".
func cutTop(s string, sep byte) (string, string, bool) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		default:
			if c != sep || depth != 0 {
				continue
			}
			if sep == '=' && (i+1 < len(s) && s[i+1] == '=' || i > 0 && strings.IndexByte("=<>!:", s[i-1]) >= 0) {
				continue
			}
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

package doctor

import (
	"strconv"
	"strings"
)

// A small reader of Python source, enough to read server_args.py and the
// models' EntryClass statically: logical lines (brackets, strings and
// backslashes join physical lines; comments dropped), splitting at the
// top level, and literals. It never runs or imports anything.

// pyLine is one logical line.
type pyLine struct {
	Line   int    // 1-based line of its first physical line
	Indent int    // columns of leading white space of that line
	Text   string // the code, comments dropped, physical lines joined by "\n"
}

// maxPyLines bounds the logical lines read from one file; the largest
// sglang source (server_args.py) has about 12,000.
const maxPyLines = 200_000

// pyLines splits src into logical lines, skipping blank ones.
func pyLines(src string) []pyLine {
	var out []pyLine
	line := 1
	i := 0
	for i < len(src) && len(out) < maxPyLines {
		// Leading white space of a physical line.
		start, indent := i, 0
		for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
			indent++
			i++
		}
		first := line
		var b strings.Builder
		depth := 0
		for i < len(src) {
			c := src[i]
			switch {
			case c == '#':
				for i < len(src) && src[i] != '\n' {
					i++
				}
				continue
			case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
				b.WriteByte(' ')
				i += 2
				line++
				continue
			case c == '\n':
				line++
				i++
				if depth > 0 {
					b.WriteByte('\n')
					continue
				}
			case isQuote(src, i):
				end := skipPyString(src, i)
				line += strings.Count(src[i:end], "\n")
				b.WriteString(src[i:end])
				i = end
				continue
			case c == '(' || c == '[' || c == '{':
				depth++
			case c == ')' || c == ']' || c == '}':
				if depth > 0 {
					depth--
				}
			}
			if c == '\n' {
				break
			}
			b.WriteByte(c)
			i++
		}
		if t := strings.TrimSpace(b.String()); t != "" {
			out = append(out, pyLine{Line: first, Indent: indent, Text: t})
		}
		if i == start {
			i++ // no progress: never loop
		}
	}
	return out
}

// isQuote reports whether a string literal starts at i: a quote, or a
// prefix of up to two letters (r, b, f, u, rb, fr, ...) and a quote,
// where the prefix does not continue a name.
func isQuote(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	if s[i] == '"' || s[i] == '\'' {
		return true
	}
	if i > 0 && isIdent(s[i-1]) {
		return false
	}
	j := i
	for j < len(s) && j-i < 2 && strings.IndexByte("rRbBfFuU", s[j]) >= 0 {
		j++
	}
	return j > i && j < len(s) && (s[j] == '"' || s[j] == '\'')
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// skipPyString returns the end of the string literal starting at i (its
// prefix included); an unterminated one ends the source.
func skipPyString(s string, i int) int {
	raw := false
	for i < len(s) && s[i] != '"' && s[i] != '\'' {
		if s[i] == 'r' || s[i] == 'R' {
			raw = true
		}
		i++
	}
	if i >= len(s) {
		return len(s)
	}
	q := s[i]
	triple := i+2 < len(s) && s[i+1] == q && s[i+2] == q
	if triple {
		i += 3
	} else {
		i++
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\' && !raw:
			i += 2
			continue
		case c == '\\' && raw:
			i += 2 // a raw string still cannot end in an escaped quote
			continue
		case c == '\n' && !triple:
			return i // unterminated: stop at the line end
		case c == q:
			if !triple {
				return i + 1
			}
			if i+2 < len(s) && s[i+1] == q && s[i+2] == q {
				return i + 3
			}
		}
		i++
	}
	return len(s)
}

// splitTop splits s at sep where it is outside brackets and strings.
func splitTop(s string, sep byte) []string {
	var out []string
	depth, last := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isQuote(s, i):
			i = skipPyString(s, i) - 1
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case c == sep && depth == 0:
			out = append(out, strings.TrimSpace(s[last:i]))
			last = i + 1
		}
	}
	if rest := strings.TrimSpace(s[last:]); rest != "" || len(out) > 0 {
		out = append(out, rest)
	}
	return out
}

// assignAt is the index of the first top-level "=" of s that is an
// assignment (not ==, <=, >=, !=, nor inside brackets), or -1.
func assignAt(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isQuote(s, i):
			i = skipPyString(s, i) - 1
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case c == '=' && depth == 0:
			if i+1 < len(s) && s[i+1] == '=' {
				i++
				continue
			}
			if i > 0 && strings.IndexByte("=<>!:", s[i-1]) >= 0 {
				continue
			}
			return i
		}
	}
	return -1
}

// callArgs splits "Name(args)" into Name and its arguments, split at the
// top level; ok false when s is not one call.
func callArgs(s string) (name string, args []string, ok bool) {
	s = strings.TrimSpace(s)
	open := strings.IndexByte(s, '(')
	if open <= 0 || !strings.HasSuffix(s, ")") {
		return "", nil, false
	}
	name = strings.TrimSpace(s[:open])
	for i := 0; i < len(name); i++ {
		if !isIdent(name[i]) && name[i] != '.' {
			return "", nil, false
		}
	}
	inner := s[open+1 : len(s)-1]
	if closeOf(s, open) != len(s)-1 {
		return "", nil, false
	}
	return name, splitTop(inner, ','), true
}

// closeOf is the index of the bracket that closes the one at open, or -1.
func closeOf(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		c := s[i]
		switch {
		case isQuote(s, i):
			i = skipPyString(s, i) - 1
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// kwarg splits "key=value" (a keyword argument); ok false for a
// positional one.
func kwarg(a string) (key, value string, ok bool) {
	i := assignAt(a)
	if i <= 0 {
		return "", "", false
	}
	key = strings.TrimSpace(a[:i])
	for j := 0; j < len(key); j++ {
		if !isIdent(key[j]) {
			return "", "", false
		}
	}
	return key, strings.TrimSpace(a[i+1:]), true
}

// pyValue is a Python literal as doctor keeps it: the strings argparse
// and the rules compare ("True", "auto", "8"), several for a list; None
// is no value.
type pyValue struct {
	Vals []string
	None bool
}

// literal reads a Python literal: strings (adjacent ones joined), numbers,
// True, False, None, and lists or tuples of them; ok false for anything
// else (a name, a call, an expression).
func literal(s string) (pyValue, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return pyValue{}, false
	}
	// A parenthesised literal (a long string wrapped in parentheses), not a tuple.
	if s[0] == '(' && closeOf(s, 0) == len(s)-1 {
		inner := s[1 : len(s)-1]
		if parts := splitTop(inner, ','); len(parts) == 1 {
			return literal(inner)
		}
	}
	switch s {
	case "None":
		return pyValue{None: true}, true
	case "True", "False":
		return pyValue{Vals: []string{s}}, true
	}
	if isQuote(s, 0) {
		str, ok := pyStrings(s)
		if !ok {
			return pyValue{}, false
		}
		return pyValue{Vals: []string{str}}, true
	}
	if (s[0] == '[' || s[0] == '(') && closeOf(s, 0) == len(s)-1 {
		var vals []string
		for _, p := range splitTop(s[1:len(s)-1], ',') {
			if p == "" {
				continue
			}
			v, ok := literal(p)
			if !ok || v.None || len(v.Vals) != 1 {
				return pyValue{}, false
			}
			vals = append(vals, v.Vals[0])
		}
		return pyValue{Vals: vals}, true
	}
	if n, ok := pyNumber(s); ok {
		return pyValue{Vals: []string{n}}, true
	}
	return pyValue{}, false
}

// pyNumber reads an int or float literal (underscores, a sign, an
// exponent), written back the way Python prints it for ints.
func pyNumber(s string) (string, bool) {
	t := strings.ReplaceAll(s, "_", "")
	if i, err := strconv.ParseInt(t, 0, 64); err == nil {
		return strconv.FormatInt(i, 10), true
	}
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		return strconv.FormatFloat(f, 'g', -1, 64), true
	}
	return "", false
}

// pyStrings reads adjacent string literals (implicit concatenation) into
// one; f-strings are read as written.
func pyStrings(s string) (string, bool) {
	var b strings.Builder
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t') {
			i++
		}
		if i >= len(s) {
			break
		}
		if !isQuote(s, i) {
			return "", false
		}
		end := skipPyString(s, i)
		str, ok := unquote(s[i:end])
		if !ok {
			return "", false
		}
		b.WriteString(str)
		i = end
	}
	return b.String(), true
}

// unquote is the text of one string literal.
func unquote(lit string) (string, bool) {
	raw := false
	i := 0
	for i < len(lit) && lit[i] != '"' && lit[i] != '\'' {
		if lit[i] == 'r' || lit[i] == 'R' {
			raw = true
		}
		if lit[i] == 'b' || lit[i] == 'B' {
			return "", false
		}
		i++
	}
	body := lit[i:]
	n := 1
	if len(body) >= 6 && (strings.HasPrefix(body, `"""`) || strings.HasPrefix(body, `'''`)) {
		n = 3
	}
	if len(body) < 2*n || body[:n] != body[len(body)-n:] {
		return "", false
	}
	body = body[n : len(body)-n]
	if raw || !strings.Contains(body, `\`) {
		return body, true
	}
	var b strings.Builder
	for j := 0; j < len(body); j++ {
		c := body[j]
		if c != '\\' || j+1 >= len(body) {
			b.WriteByte(c)
			continue
		}
		j++
		switch body[j] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case '\\', '\'', '"':
			b.WriteByte(body[j])
		case '\n':
		default:
			b.WriteByte('\\')
			b.WriteByte(body[j])
		}
	}
	return b.String(), true
}

package tomlfile

import (
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Lines maps the keys of a TOML document to the lines that define them:
// the decoder keeps key positions to itself, so an error about a value
// (an unknown axis, a bad pattern, a key nobody reads) finds its line
// here. An element of an array of tables is named by its index as a key
// part: toml.Key{"exclude", "1", "nccl"} is key nccl of the second
// [[exclude]]. It is a tolerant scanner of a document that already
// decoded, not a parser.
type Lines struct {
	// at holds each key path's line; "\x01" and a path without array
	// indices hold the line of the first element that defines it.
	at map[string]int
}

func keyPath(parts ...string) string { return strings.Join(parts, "\x00") }

// Line is the line that defines key, or the nearest table above it that
// the file defines (the longest prefix of key it knows); 0 when none. A
// key without the index of an element of an array of tables (as the
// decoder reports keys) is placed at the first element that defines it.
// Line fits Unknown's lineOf.
func (l *Lines) Line(key toml.Key) int {
	if l == nil {
		return 0
	}
	if line, ok := l.at["\x01"+keyPath(key...)]; ok {
		if _, exact := l.at[keyPath(key...)]; !exact {
			return line
		}
	}
	for n := len(key); n > 0; n-- {
		if line, ok := l.at[keyPath(key[:n]...)]; ok {
			return line
		}
	}
	return 0
}

// IndexLines finds the line of every table header and key of a TOML
// document that was decoded without error (it tolerates what it does not
// understand, and says 0 for it).
func IndexLines(data []byte) *Lines {
	li := map[string]int{}
	arrays := map[string]int{} // array-of-tables path -> last index
	var table, rawTable []string
	set := func(path, raw []string, l int) {
		if _, ok := li[keyPath(path...)]; !ok {
			li[keyPath(path...)] = l
		}
		// Undecoded keys name array-of-tables elements without their
		// index; the first element's line stands for them.
		if r := "\x01" + keyPath(raw...); raw != nil && li[r] == 0 {
			li[r] = l
		}
	}
	depth := 0 // open brackets/braces of a value spanning lines
	inML := "" // open multi-line string delimiter
	for n, raw := range strings.Split(string(data), "\n") {
		lineNo := n + 1
		s := raw
		if inML != "" {
			i := strings.Index(s, inML)
			if i < 0 {
				continue
			}
			s = s[i+3:]
			inML = ""
			depth, inML = scanValue(s, depth)
			continue
		}
		if depth > 0 {
			depth, inML = scanValue(s, depth)
			continue
		}
		t := strings.TrimSpace(s)
		if t == "" || t[0] == '#' {
			continue
		}
		if strings.HasPrefix(t, "[[") {
			keys, _ := parseKey(t[2:])
			p := resolveArrays(keys, arrays, true)
			table, rawTable = p, keys
			li[keyPath(p...)] = lineNo
			for i := 1; i < len(p); i++ {
				set(p[:i], nil, lineNo)
			}
			set(p, keys, lineNo)
			continue
		}
		if t[0] == '[' {
			keys, _ := parseKey(t[1:])
			table, rawTable = resolveArrays(keys, arrays, false), keys
			for i := 1; i <= len(table); i++ {
				set(table[:i], nil, lineNo)
			}
			set(table, keys, lineNo)
			continue
		}
		keys, rest := parseKey(t)
		if len(keys) == 0 {
			continue
		}
		full := append(append([]string(nil), table...), keys...)
		raw := append(append([]string(nil), rawTable...), keys...)
		for i := len(table) + 1; i <= len(full); i++ {
			set(full[:i], raw[:len(rawTable)+i-len(table)], lineNo)
		}
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, "=") {
			depth, inML = scanValue(rest[1:], 0)
		}
	}
	return &Lines{at: li}
}

// resolveArrays inserts the current element index after every prefix that is
// an array of tables; for a [[header]] it starts a new element.
func resolveArrays(keys []string, arrays map[string]int, newElem bool) []string {
	var out []string
	for i, k := range keys {
		out = append(out, k)
		p := keyPath(keys[:i+1]...)
		if i == len(keys)-1 && newElem {
			idx, ok := arrays[p]
			if ok {
				idx++
			}
			arrays[p] = idx
			out = append(out, strconv.Itoa(idx))
			continue
		}
		if idx, ok := arrays[p]; ok {
			out = append(out, strconv.Itoa(idx))
		}
	}
	return out
}

// parseKey reads a dotted key (bare, "basic" or 'literal' parts) and returns
// the parts and what follows it.
func parseKey(s string) ([]string, string) {
	var parts []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return parts, s
		}
		switch s[0] {
		case '"':
			end := 1
			for end < len(s) && s[end] != '"' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(s) {
				return parts, ""
			}
			v, err := strconv.Unquote(s[:end+1])
			if err != nil {
				v = s[1:end]
			}
			parts = append(parts, v)
			s = s[end+1:]
		case '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return parts, ""
			}
			parts = append(parts, s[1:end+1])
			s = s[end+2:]
		default:
			end := 0
			for end < len(s) && isBare(s[end]) {
				end++
			}
			if end == 0 {
				return parts, s
			}
			parts = append(parts, s[:end])
			s = s[end:]
		}
		t := strings.TrimLeft(s, " \t")
		if !strings.HasPrefix(t, ".") {
			return parts, t
		}
		s = t[1:]
	}
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// scanValue tracks bracket depth and multi-line strings through a value.
func scanValue(s string, depth int) (int, string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '#':
			return depth, ""
		case '[', '{':
			depth++
		case ']', '}':
			if depth > 0 {
				depth--
			}
		case '"', '\'':
			if strings.HasPrefix(s[i:], `"""`) || strings.HasPrefix(s[i:], `'''`) {
				delim := s[i : i+3]
				j := strings.Index(s[i+3:], delim)
				if j < 0 {
					return depth, delim
				}
				i += 3 + j + 2
				continue
			}
			j := i + 1
			for j < len(s) && s[j] != c {
				if c == '"' && s[j] == '\\' {
					j++
				}
				j++
			}
			i = j
		}
	}
	return depth, ""
}

package source

import "bytes"

// Scanners for two small languages this package reads: one comparison of
// a constraint list, and a version.py __version__ literal (a range walk
// reads one per revision). Each accepts exactly the language of the
// regular expression written above it and returns the same parts; the
// tests hold those expressions and compare the two on fuzzed input.

// isSpace is the regular expressions' \s: ASCII tab, newline, form feed,
// carriage return and space (not \v, not Unicode spaces).
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// constraintOps are the comparison operators in the order the regular
// expression tries them.
var constraintOps = []string{"===", "==", "!=", "~=", "~>", "<=", ">=", "<", ">", "="}

// scanConstraint reads one comparison as the regular expression
//
//	^\s*(===|==|!=|~=|~>|<=|>=|<|>|=)?\s*(.*?)\s*$
//
// does: the operator ("" if none) and the version text, without the
// spaces around them. ok is false where the regular expression does not
// match: a newline inside the version text ('.' does not match one).
func scanConstraint(s string) (op, vs string, ok bool) {
	i := skipSpace(s, 0)
	for _, o := range constraintOps {
		if len(s)-i >= len(o) && s[i:i+len(o)] == o {
			op = o
			i += len(o)
			break
		}
	}
	i = skipSpace(s, i)
	e := len(s)
	for e > i && isSpace(s[e-1]) {
		e--
	}
	for k := i; k < e; k++ {
		if s[k] == '\n' {
			return "", "", false
		}
	}
	return op, s[i:e], true
}

// versionLiteral finds the first __version__ literal of data at or after
// byte from, as one match of the regular expression
//
//	(?m)^__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']
//
// does: start and end of the match, and of the quoted text. ok is false
// when there is none.
func versionLiteral(data []byte, from int) (start, end, vStart, vEnd int, ok bool) {
	for ls := from; ls < len(data); {
		if ls == 0 || data[ls-1] == '\n' {
			if e, vs, ve, ok := versionLiteralAt(data, ls); ok {
				return ls, e, vs, ve, true
			}
		}
		nl := bytes.IndexByte(data[ls:], '\n')
		if nl < 0 {
			break
		}
		ls += nl + 1
	}
	return 0, 0, 0, 0, false
}

func skipSpaceBytes(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// versionLiteralAt matches the literal's expression at b[i:], a line's start.
func versionLiteralAt(b []byte, i int) (end, vStart, vEnd int, ok bool) {
	const name = "__version__"
	if !bytes.HasPrefix(b[i:], []byte(name)) {
		return 0, 0, 0, false
	}
	i = skipSpaceBytes(b, i+len(name))
	if i < len(b) && b[i] == ':' {
		i = skipSpaceBytes(b, i+1)
		if !bytes.HasPrefix(b[i:], []byte("str")) {
			return 0, 0, 0, false
		}
		i = skipSpaceBytes(b, i+len("str"))
	}
	if i >= len(b) || b[i] != '=' {
		return 0, 0, 0, false
	}
	i = skipSpaceBytes(b, i+1)
	if i >= len(b) || (b[i] != '"' && b[i] != '\'') {
		return 0, 0, 0, false
	}
	vStart = i + 1
	vEnd = vStart
	for vEnd < len(b) && b[vEnd] != '"' && b[vEnd] != '\'' {
		vEnd++
	}
	if vEnd == vStart || vEnd >= len(b) {
		return 0, 0, 0, false
	}
	return vEnd + 1, vStart, vEnd, true
}

package source

import "bytes"

// Hand-written scanners for the three small languages this package reads
// on every apply and revert: a PEP 440 version, one comparison of a
// constraint list, and a version.py __version__ literal. Each accepts
// exactly the language of the regular expression written above it and
// returns the same parts; the tests hold those expressions and compare
// the two on fuzzed input.

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

// skipDigits returns the end of the ASCII digits at s[i:].
func skipDigits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// skipSep steps over one of '-', '_', '.' at s[i], if there is one.
func skipSep(s string, i int) int {
	if i < len(s) && (s[i] == '-' || s[i] == '_' || s[i] == '.') {
		return i + 1
	}
	return i
}

// Under case folding, 'k' also matches KELVIN SIGN (U+212A) and 's' LATIN
// SMALL LETTER LONG S (U+017F), as (?i) does.
const (
	kelvin = "\u212a"
	longS  = "\u017f"
)

// foldLetter returns the end of one letter at s[i] that folds to the
// lower-case ASCII letter c, or -1.
func foldLetter(s string, i int, c byte) int {
	if i >= len(s) {
		return -1
	}
	if b := s[i]; b == c || b == c-'a'+'A' {
		return i + 1
	}
	switch {
	case c == 'k' && len(s)-i >= len(kelvin) && s[i:i+len(kelvin)] == kelvin:
		return i + len(kelvin)
	case c == 's' && len(s)-i >= len(longS) && s[i:i+len(longS)] == longS:
		return i + len(longS)
	}
	return -1
}

// foldWord returns the end of the lower-case ASCII word w at s[i:],
// case-insensitively, or -1.
func foldWord(s string, i int, w string) int {
	for j := 0; j < len(w); j++ {
		if i = foldLetter(s, i, w[j]); i < 0 {
			return -1
		}
	}
	return i
}

// longestWord returns the end and text of the longest of words at s[i:]
// (case-insensitive), or -1. Where the regular expression lists a shorter
// word first ("a" before "alpha"), the shorter one leaves a letter that
// nothing after it can match, so the longest is the one it ends with.
func longestWord(s string, i int, words []string) (int, string) {
	end := -1
	for _, w := range words {
		if e := foldWord(s, i, w); e > end {
			end = e
		}
	}
	if end < 0 {
		return -1, ""
	}
	return end, s[i:end]
}

// localChar returns the end of one [a-z0-9] character (case-insensitive)
// at s[i], or -1.
func localChar(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch b := s[i]; {
	case b >= '0' && b <= '9', b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z':
		return i + 1
	case len(s)-i >= len(kelvin) && s[i:i+len(kelvin)] == kelvin:
		return i + len(kelvin)
	case len(s)-i >= len(longS) && s[i:i+len(longS)] == longS:
		return i + len(longS)
	}
	return -1
}

// pep440Parts are the parts of a PEP 440 version as written; "" where
// absent.
type pep440Parts struct {
	epoch   string // N of "N!"
	release string // "0.5.6"
	pre     string // a, b, c, rc, alpha, beta, pre or preview, as written
	preN    string
	postN   string // N of the implicit post-release "-N"
	post    string // post, rev or r, as written
	postLN  string // N after post, rev or r
	dev     string // dev, as written
	devN    string
	local   string // after "+"
}

var (
	preWords  = []string{"a", "b", "c", "rc", "alpha", "beta", "pre", "preview"}
	postWords = []string{"post", "rev", "r"}
	devWords  = []string{"dev"}
)

// scanPEP440 reads s as the regular expression
//
//	(?i)^\s*v?(?:([0-9]+)!)?([0-9]+(?:\.[0-9]+)*)
//	(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?([0-9]+)?)?
//	(?:-([0-9]+)|[-_.]?(post|rev|r)[-_.]?([0-9]+)?)?
//	(?:[-_.]?(dev)[-_.]?([0-9]+)?)?
//	(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$
//
// does, returning its ten groups.
func scanPEP440(s string) (m pep440Parts, ok bool) {
	i := skipSpace(s, 0)
	if i < len(s) && (s[i] == 'v' || s[i] == 'V') {
		i++
	}
	if j := skipDigits(s, i); j > i && j < len(s) && s[j] == '!' {
		m.epoch, i = s[i:j], j+1
	}
	j := skipDigits(s, i)
	if j == i {
		return pep440Parts{}, false
	}
	for j < len(s) && s[j] == '.' {
		k := skipDigits(s, j+1)
		if k == j+1 {
			break
		}
		j = k
	}
	m.release, i = s[i:j], j
	// A separator after a word goes with the number if one follows;
	// where none does, taking it or leaving it to the next part matches
	// the same texts with the same groups.
	word := func(words []string) (w, n string, ok bool) {
		k := skipSep(s, i)
		e, w := longestWord(s, k, words)
		if e < 0 {
			return "", "", false
		}
		k = skipSep(s, e)
		d := skipDigits(s, k)
		n, i = s[k:d], d
		return w, n, true
	}
	if w, n, ok := word(preWords); ok {
		m.pre, m.preN = w, n
	}
	if i < len(s) && s[i] == '-' && skipDigits(s, i+1) > i+1 {
		d := skipDigits(s, i+1)
		m.postN, i = s[i+1:d], d
	} else if w, n, ok := word(postWords); ok {
		m.post, m.postLN = w, n
	}
	if w, n, ok := word(devWords); ok {
		m.dev, m.devN = w, n
	}
	if i < len(s) && s[i] == '+' {
		start := i + 1
		k := localChar(s, start)
		if k < 0 {
			return pep440Parts{}, false
		}
		for e := localChar(s, k); e >= 0; e = localChar(s, e) {
			k = e
		}
		for {
			k2 := skipSep(s, k)
			if k2 == k {
				break
			}
			e := localChar(s, k2)
			if e < 0 {
				break
			}
			for n := localChar(s, e); n >= 0; n = localChar(s, e) {
				e = n
			}
			k = e
		}
		m.local, i = s[start:k], k
	}
	if skipSpace(s, i) != len(s) {
		return pep440Parts{}, false
	}
	return m, true
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

package shell

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// plain reports whether b needs no quotes: letters, digits and a few
// punctuation marks that mean nothing to bash in a word.
func plain(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-_./:=,+@%", b) >= 0
}

// Quote returns s as one bash word that reads back as s byte for byte in
// every locale (see the package doc). A NUL cannot be carried: Check
// refuses it, and Quote drops nothing but cannot make bash read it.
func Quote(s string) string {
	bare := s != ""
	for i := 0; i < len(s) && bare; i++ {
		bare = plain(s[i])
	}
	if bare {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each word and joins them with spaces: a command line.
func Join(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}

// ErrNUL is wrapped by Check's error for a string holding a NUL: no
// argument, variable or script line can carry one.
var ErrNUL = errors.New("holds a NUL, which no shell word can carry")

// ErrControl is wrapped by Check's error for a string holding a control
// character other than a tab: Quote would carry it, but the script would
// no longer read one word to a line (a line break), or a terminal showing
// the script would act on it (an escape sequence).
var ErrControl = errors.New("holds a control character")

// Check refuses what a script smpatch writes must not carry: a NUL, and
// control characters other than a tab (C0, DEL, C1) or bidirectional
// formatting characters. The error names the first such character.
func Check(s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("%q %w", around(s, i), ErrNUL)
	}
	for i, r := range s {
		if isControl(r) {
			return fmt.Errorf("%q %w (%s)", around(s, i), ErrControl, escapeRune(r))
		}
	}
	return nil
}

// around is s, or for a long one the 60 bytes or so around i with "...",
// for a message that quotes it.
func around(s string, i int) string {
	if len(s) <= 80 {
		return s
	}
	lo, hi := max(0, i-30), min(len(s), i+30)
	for lo > 0 && !utf8.RuneStart(s[lo]) {
		lo--
	}
	for hi < len(s) && !utf8.RuneStart(s[hi]) {
		hi++
	}
	out := s[lo:hi]
	if lo > 0 {
		out = "..." + out
	}
	if hi < len(s) {
		out += "..."
	}
	return out
}

// isControl reports control characters (C0 but a tab, DEL, C1) and the
// bidirectional formatting characters, which make a line of a script show
// in another order than bash reads it (a "Trojan Source" line).
func isControl(r rune) bool {
	return (r < 0x20 && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) ||
		r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

func escapeRune(r rune) string {
	q := strconv.QuoteRune(r)
	return q[1 : len(q)-1]
}

// Comment makes s safe after "# " on a line of a script: control
// characters (a line break would end the comment and start a command),
// tabs included, and bytes that are not UTF-8 are written as Go escapes
// (\n, \x1b, \xa1).
func Comment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case isControl(r) || r == '\t':
			b.WriteString(escapeRune(r))
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

package termsafe

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLineAndText(t *testing.T) {
	for in, want := range map[string]string{
		"plain ascii\tand tab":              "plain ascii\tand tab",
		"héllo wörld":                       "héllo wörld",
		"\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07": `\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07`,
		"nul\x00byte":                       `nul\x00byte`,
		"over\rwrite":                       `over\rwrite`,
		"two\nlines":                        `two\nlines`,
		"bad\xffutf8":                       `bad\xffutf8`,
		"c1 \u009b31m csi":                  `c1 \u009b31m csi`,
		"del\x7f":                           `del\x7f`,
		"bidi \u202eevil":                   `bidi \u202eevil`,
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Text("a\nb\x1b"); got != "a\nb\\x1b" {
		t.Errorf("Text keeps newlines: %q", got)
	}
}

func TestWriterSplitRunes(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	in := "é\x1b[31m→ok\n"
	for i := 0; i < len(in); i++ {
		w.Write([]byte{in[i]})
	}
	w.Flush()
	if got := out.String(); got != "é\\x1b[31m→ok\n" {
		t.Errorf("byte-by-byte writes = %q", got)
	}
}

func TestWrapNonTerminal(t *testing.T) {
	var b bytes.Buffer
	if Wrap(&b) != &b {
		t.Error("a buffer was wrapped")
	}
}

// FuzzLine checks that escaped text never holds a control character or
// invalid UTF-8, and that clean text is unchanged.
func FuzzLine(f *testing.F) {
	f.Add("\x1b]52;c;QQ==\x07")
	f.Add("ok")
	f.Add("\xe2\x80")
	f.Fuzz(func(t *testing.T, s string) {
		out := Line(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Line(%q) is not UTF-8", s)
		}
		for _, r := range out {
			if unsafeRune(r, false) {
				t.Fatalf("Line(%q) = %q holds %U", s, out, r)
			}
		}
		clean := utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return unsafeRune(r, false) })
		if clean != (out == s) {
			t.Fatalf("Line(%q) = %q: clean text must be kept as is, other text changed", s, out)
		}
	})
}

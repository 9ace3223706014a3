package shell

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestQuoteForms(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain", "a b": "'a b'", "it's": `'it'\''s'`, "": "''", "$HOME": "'$HOME'",
		`Output \(tok/s\)`: `'Output \(tok/s\)'`, "--x=1": "--x=1", "a\nb": "'a\nb'",
		"\t\u4861'; touch PWNED; #": "'\t\u4861'\\''; touch PWNED; #'",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(Quote(in), "$'") {
			t.Errorf("Quote(%q) uses $'...'", in)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, s := range []string{"a\tb", "é", "\xa1\\", "x'y"} {
		if err := Check(s); err != nil {
			t.Errorf("Check(%q): %v", s, err)
		}
	}
	for s, want := range map[string]error{"a\x00b": ErrNUL, "a\nb": ErrControl, "\x1b]52;c;QQ==\x07": ErrControl, "\u009b": ErrControl, "\x7f": ErrControl, "a\u202e';rm -rf ~;#": ErrControl, "\u2066x": ErrControl} {
		if err := Check(s); !errors.Is(err, want) {
			t.Errorf("Check(%q) = %v, want %v", s, err, want)
		}
	}
}

func TestComment(t *testing.T) {
	for in, want := range map[string]string{
		"r\ntouch PWNED\n#": `r\ntouch PWNED\n#`, "a\tb": `a\tb`, "\x1b]52": `\x1b]52`, "\xa1\\": `\xa1\`, "é": "é", "a\u202eb": `a\u202eb`,
	} {
		if got := Comment(in); got != want {
			t.Errorf("Comment(%q) = %q, want %q", in, got, want)
		}
	}
}

// hostileWords are strings built to break quoting: every lead byte of the
// multi-byte locales before a backslash and a quote, the BIG5 case, bytes
// that are not UTF-8, and random bytes.
func hostileWords() []string {
	words := []string{
		"\t\u4861'; touch PWNED; #", "'", "''", `\'`, `\`, "a'b'c", "$(touch PWNED)", "`touch PWNED`",
		"\xa1'; touch PWNED; #", "\xa1\\'; touch PWNED; #", "x\n'touch PWNED'\n#", "\xff\xfe", "\xe4\xa1",
	}
	for lead := 0x81; lead <= 0xfe; lead++ {
		words = append(words, string([]byte{byte(lead), '\\', '\''})+"; touch PWNED; #", string([]byte{'a', byte(lead)})+"'")
	}
	rng := rand.New(rand.NewSource(27))
	for range 300 {
		b := make([]byte, 1+rng.Intn(24))
		for i := range b {
			switch rng.Intn(4) {
			case 0:
				b[i] = "'\\\"$`;\n"[rng.Intn(7)]
			case 1:
				b[i] = byte(0x81 + rng.Intn(0x7e))
			default:
				b[i] = byte(1 + rng.Intn(255))
			}
		}
		words = append(words, string(b))
	}
	return words
}

// multibyte models how a locale pairs bytes: a lead byte followed by a
// valid trail byte is one character.
type multibyte struct {
	name        string
	lead, trail func(byte) bool
}

var locales = []multibyte{
	{"BIG5", func(b byte) bool { return b >= 0x81 && b <= 0xfe }, func(b byte) bool { return b >= 0x40 && b <= 0x7e || b >= 0xa1 && b <= 0xfe }},
	{"GBK", func(b byte) bool { return b >= 0x81 && b <= 0xfe }, func(b byte) bool { return b >= 0x40 && b <= 0xfe && b != 0x7f }},
	{"SHIFT_JIS", func(b byte) bool { return b >= 0x81 && b <= 0x9f || b >= 0xe0 && b <= 0xfc }, func(b byte) bool { return b >= 0x40 && b <= 0x7e || b >= 0x80 && b <= 0xfc }},
}

// readWord reads one word the way bash does in the locale: characters (a
// lead byte takes its trail with it), outside quotes a backslash escapes
// the next character, single quotes take everything to the next quote
// character, and $'...' decodes \' and \\ escapes. It returns the word and
// the rest of the input.
func (l multibyte) readWord(s string) (string, string) {
	next := func(i int) int { // the end of the character at i
		if l.lead(s[i]) && i+1 < len(s) && l.trail(s[i+1]) {
			return i + 2
		}
		return i + 1
	}
	var w strings.Builder
	i := 0
	for i < len(s) && s[i] != ' ' {
		switch {
		case s[i] == '\\':
			j := next(i + 1)
			w.WriteString(s[i+1 : j])
			i = j
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '\'':
			i += 2
			for i < len(s) && s[i] != '\'' {
				if s[i] == '\\' && i+1 < len(s) {
					j := next(i + 1)
					w.WriteString(s[i+1 : j])
					i = j
					continue
				}
				j := next(i)
				w.WriteString(s[i:j])
				i = j
			}
			i++
		case s[i] == '\'':
			i++
			for i < len(s) && s[i] != '\'' {
				j := next(i)
				w.WriteString(s[i:j])
				i = j
			}
			i++
		default:
			j := next(i)
			w.WriteString(s[i:j])
			i = j
		}
	}
	return w.String(), s[i:]
}

// oldQuote is the $'...' form once written for words with control
// characters, kept as the model's negative control.
func oldQuote(s string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("'")
	return b.String()
}

// TestQuoteMultibyteModel reads every hostile word back through the model
// of each multi-byte locale: Quote's word is the value and the whole input
// is one word; the $'...' form it replaced is not (the model catches the
// injection the BIG5 locale showed).
func TestQuoteMultibyteModel(t *testing.T) {
	for _, l := range locales {
		for _, s := range hostileWords() {
			q := Quote(s)
			if got, rest := l.readWord(q + " X"); got != s || rest != " X" {
				t.Errorf("%s: Quote(%q) = %q reads back as %q, then %q", l.name, s, q, got, rest)
			}
		}
	}
	bad := "\t\u4861'; touch PWNED; #"
	if got, rest := locales[0].readWord(oldQuote(bad)); got == bad && rest == "" {
		t.Error("the model does not see the BIG5 injection of $'...'")
	}
}

func FuzzQuote(f *testing.F) {
	for _, s := range hostileWords()[:40] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		if strings.Contains(q, "$'") && !strings.HasPrefix(q, "'") {
			t.Fatalf("Quote(%q) = %q", s, q)
		}
		for _, l := range locales {
			if got, rest := l.readWord(q + " X"); got != s || rest != " X" {
				t.Fatalf("%s: Quote(%q) = %q reads back as %q, then %q", l.name, s, q, got, rest)
			}
		}
		c := Comment(s)
		if strings.ContainsAny(c, "\n\r") {
			t.Fatalf("Comment(%q) = %q spans lines", s, c)
		}
	})
}

// realLocales builds the multi-byte locales with localedef into a
// directory of the test's (LOCPATH), where it can.
func realLocales(t *testing.T) (string, []string) {
	localedef, err := exec.LookPath("localedef")
	if err != nil {
		return "", nil
	}
	dir := t.TempDir()
	var names []string
	for _, l := range []struct{ name, input, charmap string }{
		{"zh_TW.BIG5", "zh_TW", "BIG5"}, {"zh_CN.GBK", "zh_CN", "GBK"}, {"ja_JP.SJIS", "ja_JP", "SHIFT_JIS"},
	} {
		cmd := exec.Command(localedef, "--no-warnings=ascii", "-i", l.input, "-f", l.charmap, filepath.Join(dir, l.name))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("localedef %s: %v %s", l.name, err, bytes.TrimSpace(out))
			continue
		}
		names = append(names, l.name)
	}
	return dir, names
}

// TestQuoteRealLocales runs a script of every hostile word, quoted, under
// bash in C, C.UTF-8 and (where localedef can build them) zh_TW.BIG5,
// zh_CN.GBK and ja_JP.SJIS: each word prints back as it was, and nothing
// else runs.
func TestQuoteRealLocales(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	words := hostileWords()
	dir := t.TempDir()
	var script bytes.Buffer
	script.WriteString("set -u\n")
	for _, w := range words {
		fmt.Fprintf(&script, "printf '%%s\\0' %s\n", Quote(w))
		fmt.Fprintf(&script, "# %s\n", Comment(w))
	}
	path := filepath.Join(dir, "words.sh")
	if err := os.WriteFile(path, script.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	locpath, multi := realLocales(t)
	if len(multi) == 0 {
		t.Log("no multi-byte locale could be built: the model (TestQuoteMultibyteModel) stands in")
	}
	for _, loc := range append([]string{"C", "C.UTF-8"}, multi...) {
		cmd := exec.Command(bash, path)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=" + loc, "LOCPATH=" + locpath}
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%s: %v", loc, err)
			continue
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if len(got) != len(words) {
			t.Errorf("%s: %d words back, want %d", loc, len(got), len(words))
			continue
		}
		for i := range words {
			if got[i] != words[i] {
				t.Errorf("%s: %q read back as %q", loc, words[i], got[i])
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "PWNED")); err == nil {
			t.Fatalf("%s: a word ran as a command", loc)
		}
	}
	if len(multi) > 0 && multi[0] == "zh_TW.BIG5" {
		// The $'...' form this package replaced injects under BIG5.
		bad := filepath.Join(dir, "old.sh")
		os.WriteFile(bad, []byte("v="+oldQuote("\t\u4861'; touch PWNED; #")+"\n"), 0o644)
		cmd := exec.Command(bash, bad)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=zh_TW.BIG5", "LOCPATH=" + locpath}
		cmd.Run()
		if _, err := os.Stat(filepath.Join(dir, "PWNED")); err != nil {
			t.Error("the $'...' form did not inject under BIG5: the test no longer sees the case")
		}
	}
}

package udiff

import (
	"bytes"
	"testing"
)

// linesOf makes a text of few distinct lines from fuzz bytes, so that the
// texts repeat themselves the way diffs find ambiguous: each byte picks
// one of four lines; the text's last line has no newline when the last
// byte is odd.
func linesOf(data []byte) []byte {
	var b bytes.Buffer
	for _, c := range data {
		b.WriteByte('a' + c%4)
		b.WriteByte('\n')
	}
	if n := len(data); n > 0 && data[n-1]&1 == 1 {
		b.Truncate(b.Len() - 1)
	}
	return b.Bytes()
}

// FuzzLineDiff holds lineDiff, which sets the lines the two texts share at
// their ends aside before asking go-diff, to the line diff go-diff gives on
// the whole texts.
func FuzzLineDiff(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3}, []byte{0, 1, 1, 2, 3})
	f.Add([]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 1})
	f.Add([]byte{1, 0, 2}, []byte{1, 2, 0, 2})
	f.Add([]byte{0, 2}, []byte{0, 3, 0, 2})
	f.Add([]byte{}, []byte{1})
	f.Add([]byte{2, 2, 2, 2, 2, 2}, []byte{2, 2, 2})
	f.Fuzz(func(t *testing.T, x, y []byte) {
		a, b := linesOf(x), linesOf(y)
		got, want := lineDiff(a, b), lineDiffWhole(a, b)
		if len(got) != len(want) {
			t.Fatalf("%q -> %q: %d lines, want %d\n got %q\nwant %q", a, b, len(got), len(want), got, want)
		}
		for i := range got {
			if got[i].op != want[i].op || !bytes.Equal(got[i].text, want[i].text) {
				t.Fatalf("%q -> %q: line %d is %c%q, want %c%q", a, b, i, got[i].op, got[i].text, want[i].op, want[i].text)
			}
		}
	})
}

// A diff made by Between parses and, matched on the first text, makes
// the second.
func TestUnifiedDiffRoundTrip(t *testing.T) {
	for _, tt := range []struct{ a, b string }{
		{"a\nb\nc\n", "a\nB\nc\n"},
		{"a\nb", "a\nb\n"},
		{"", "x\n"},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\n2x\n3\n4\n5\n6\n7\n8\n9\n10\n11x\n12\n"},
		{"l1\r\nl2\r\n", "l1\r\nl2 changed\r\n"},
	} {
		d := Between("python/sglang/x.py", []byte(tt.a), []byte(tt.b))
		fds, err := Parse("t", d)
		if err != nil {
			t.Fatalf("%q -> %q: %v\n%s", tt.a, tt.b, err, d)
		}
		if fp := Match([]byte(tt.a), fds[0]); string(fp.New) != tt.b {
			t.Fatalf("%q -> %q: got %q\n%s", tt.a, tt.b, fp.New, d)
		}
	}
}

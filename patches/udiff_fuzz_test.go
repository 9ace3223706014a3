package patches

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

package author

import (
	"strings"
	"testing"
)

func lines(ls ...string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }

func TestMerge3(t *testing.T) {
	base := lines("a", "b", "c", "d", "e", "f", "g", "h")
	cases := []struct {
		name          string
		ours, theirs  []byte
		want          []byte
		wantConflicts int
	}{
		{"apart", lines("a", "B", "c", "d", "e", "f", "g", "h"), lines("a", "b", "c", "d", "e", "f", "G", "h"), lines("a", "B", "c", "d", "e", "f", "G", "h"), 0},
		{"alike", lines("a", "B", "c", "d", "e", "f", "g", "h"), lines("a", "B", "c", "d", "e", "f", "g", "h"), lines("a", "B", "c", "d", "e", "f", "g", "h"), 0},
		{"insert and delete apart", lines("a", "b", "x", "c", "d", "e", "f", "g", "h"), lines("a", "b", "c", "d", "e", "f", "h"), lines("a", "b", "x", "c", "d", "e", "f", "h"), 0},
		{"both", lines("a", "b", "c", "D1", "e", "f", "g", "h"), lines("a", "b", "c", "D2", "e", "f", "g", "h"),
			lines("a", "b", "c", "<<<<<<< f.py (the tree)", "D1", "||||||| p v1 (its base)", "d", "=======", "D2", ">>>>>>> p v1 (the patch)", "e", "f", "g", "h"), 1},
		{"no newline at the end", []byte("a\nb\nc\nd\ne\nf\ng\nH"), lines("A", "b", "c", "d", "e", "f", "g", "h"), []byte("A\nb\nc\nd\ne\nf\ng\nH"), 0},
	}
	for _, c := range cases {
		got, n := merge3(base, c.ours, c.theirs, "f.py", "p v1")
		if string(got) != string(c.want) || n != c.wantConflicts {
			t.Errorf("%s: %d conflicts\n%s\nwant %d\n%s", c.name, n, got, c.wantConflicts, c.want)
		}
	}
}

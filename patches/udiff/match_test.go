package udiff

import (
	"bytes"
	"strings"
	"testing"
)

func TestMatchFuzzy(t *testing.T) {
	// Upstream shape C4 drifted: a context line above the gate changed, the
	// removed line is intact.
	diff := `--- a/c.py
+++ b/c.py
@@ -3,7 +3,7 @@ def apply_flashinfer_allreduce_fusion(batch_size: int):
     # comment one
     # comment two
     return (
-        (_is_sm90_supported or _is_sm100_supported)
+        (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)
         and _is_flashinfer_available
         and batch_size > 0
         and batch_size <= FUSE_MAX_BS
`
	old := "import x\n\n    # comment one\n    # comment two (edited upstream)\n    return (\n        (_is_sm90_supported or _is_sm100_supported)\n        and _is_flashinfer_available\n        and batch_size > 0\n        and batch_size <= FUSE_MAX_BS\n)\n"
	fp := Match([]byte(old), mustDiff(t, diff)[0])
	h := fp.Hunks[0]
	if h.Status != Fuzzy || h.Score < FuzzyMinScore || h.Score >= 1 || h.Line != 3 {
		t.Fatalf("got %+v", h)
	}
	want := strings.Replace(old, "_is_sm100_supported)\n", "_is_sm100_supported or _is_sm120_supported)\n", 1)
	if string(fp.New) != want {
		t.Errorf("new:\n%s", fp.New)
	}

	// The removed line itself changed: conflict, not a guess.
	old2 := strings.Replace(old, "(_is_sm90_supported or _is_sm100_supported)", "(_is_sm90_supported or _is_sm100_supported or _is_blackwell)", 1)
	fp = Match([]byte(old2), mustDiff(t, diff)[0])
	if h := fp.Hunks[0]; h.Status != Conflict || !strings.Contains(h.Reason, "removed line") || h.Nearest == nil || h.Nearest.Start != 3 {
		t.Errorf("got %+v", h)
	}
}

func TestMatchFuzzyGuards(t *testing.T) {
	// Outer context may differ, and extra lines far from the change stay.
	diff := "--- a/f\n+++ b/f\n@@ -1,7 +1,8 @@\n A\n B\n C\n+X\n D\n E\n F\n G\n"
	fd := mustDiff(t, diff)[0]
	fp := Match([]byte("A2\nB\nQ\nC\nD\nE\nF\nG\n"), fd)
	if fp.Hunks[0].Status != Fuzzy || string(fp.New) != "A2\nB\nQ\nC\nX\nD\nE\nF\nG\n" {
		t.Errorf("outer context: %+v %q", fp.Hunks[0], fp.New)
	}
	// A context line right next to the change differs: conflict.
	fp = Match([]byte("A\nB\nC2\nD\nE\nF\nG\n"), fd)
	if h := fp.Hunks[0]; h.Status != Conflict || !strings.Contains(h.Reason, "next to the change") {
		t.Errorf("adjacent context: %+v", h)
	}
	// A line squeezed in where the change goes: conflict, not a guess.
	fp = Match([]byte("A\nB\nC\nQ\nD\nE\nF\nG\n"), fd)
	if h := fp.Hunks[0]; h.Status != Conflict || !strings.Contains(h.Reason, "contiguous") {
		t.Errorf("squeezed: %+v", h)
	}
	// Too little in common: conflict with the best region.
	fp = Match([]byte("A\nz1\nC\nD\nz2\nz3\nz4\n"), fd)
	if h := fp.Hunks[0]; h.Status != Conflict || h.Nearest == nil {
		t.Errorf("dissimilar: %+v", h)
	}
}

func TestMatchLineEndings(t *testing.T) {
	diff := "--- a/f\n+++ b/f\n@@ -1,3 +1,4 @@\n a\n-b\n+B\n+B2\n c\n"
	tests := []struct{ name, old, want string }{
		{"lf", "a\nb\nc\n", "a\nB\nB2\nc\n"},
		{"crlf", "a\r\nb\r\nc\r\n", "a\r\nB\r\nB2\r\nc\r\n"},
		{"no final newline", "a\nb\nc", "a\nB\nB2\nc"},
		{"crlf no final newline", "a\r\nb\r\nc", "a\r\nB\r\nB2\r\nc"},
		{"non-utf8", "a\nb\nc\n\xff\xfe\x00\n", "a\nB\nB2\nc\n\xff\xfe\x00\n"},
	}
	for _, tt := range tests {
		fp := Match([]byte(tt.old), mustDiff(t, diff)[0])
		if fp.Hunks[0].Status != Exact || string(fp.New) != tt.want {
			t.Errorf("%s: %s %q, want %q", tt.name, fp.Hunks[0].Status, fp.New, tt.want)
		}
	}
	// A CRLF diff applies to an LF file with LF endings, and vice versa.
	crlfDiff := strings.ReplaceAll(diff, "\n", "\r\n")
	fp := Match([]byte("a\nb\nc\n"), mustDiff(t, crlfDiff)[0])
	if string(fp.New) != "a\nB\nB2\nc\n" {
		t.Errorf("crlf diff on lf file: %q", fp.New)
	}
	// Appending after a last line without newline keeps it missing.
	app := "--- a/f\n+++ b/f\n@@ -2,1 +2,2 @@\n c\n+d\n"
	fp = Match([]byte("b\nc"), mustDiff(t, app)[0])
	if string(fp.New) != "b\nc\nd" {
		t.Errorf("append: %q", fp.New)
	}
	fp = Match([]byte("b\r\nc"), mustDiff(t, app)[0])
	if string(fp.New) != "b\r\nc\r\nd" {
		t.Errorf("append crlf: %q", fp.New)
	}
	// A diff that says the new side has no final newline removes it; one
	// that says the old side had none adds it.
	drop := "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n b\n-c\n+c\n\\ No newline at end of file\n"
	fp = Match([]byte("b\nc\n"), mustDiff(t, drop)[0])
	if string(fp.New) != "b\nc" {
		t.Errorf("drop newline: %q", fp.New)
	}
	add := "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n b\n-c\n\\ No newline at end of file\n+c\n"
	fp = Match([]byte("b\nc"), mustDiff(t, add)[0])
	if string(fp.New) != "b\nc\n" {
		t.Errorf("add newline: %q", fp.New)
	}
}

func TestMatchCreateDelete(t *testing.T) {
	create := mustDiff(t, "--- /dev/null\n+++ b/n.py\n@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n")[0]
	fp := Match(nil, create)
	if fp.Hunks[0].Status != Exact || string(fp.New) != "x = 1\ny = 2\n" || !fp.Create {
		t.Errorf("create: %+v %q", fp.Hunks, fp.New)
	}
	fp = Match([]byte("x = 1\ny = 2\n"), create)
	if fp.Hunks[0].Status != AlreadyApplied {
		t.Errorf("create again: %+v", fp.Hunks)
	}
	fp = Match([]byte("other\n"), create)
	if fp.Hunks[0].Status != Conflict || fp.New != nil {
		t.Errorf("create over other: %+v", fp.Hunks)
	}
	del := mustDiff(t, "--- a/o.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n")[0]
	fp = Match([]byte("a\nb\n"), del)
	if fp.Hunks[0].Status != Exact || !fp.Delete || fp.New != nil {
		t.Errorf("delete: %+v", fp)
	}
	fp = Match(nil, del)
	if fp.Hunks[0].Status != AlreadyApplied {
		t.Errorf("delete missing: %+v", fp.Hunks)
	}
	fp = Match([]byte("a\nb\nc\n"), del)
	if fp.Hunks[0].Status != Conflict {
		t.Errorf("delete changed: %+v", fp.Hunks)
	}
}

func TestMatchReverse(t *testing.T) {
	fd := mustDiff(t, twoHunks)[0]
	base := numbered(20)
	fp := Match([]byte(base), fd)
	// Reverse-applying restores the original, and a user's unrelated edit survives.
	edited := strings.Replace(string(fp.New), "l10\n", "user edit\n", 1)
	rp := Match([]byte(edited), fd.Reverse())
	if string(rp.New) != strings.Replace(base, "l10\n", "user edit\n", 1) {
		t.Errorf("reverse: %q", rp.New)
	}
	// Reverse on the unpatched file: every hunk is already reverted.
	rp = Match([]byte(base), fd.Reverse())
	for _, h := range rp.Hunks {
		if h.Status != AlreadyApplied {
			t.Errorf("reverse on original: %+v", h)
		}
	}
}

func TestMatchAmbiguousPrefersLongerSide(t *testing.T) {
	// A hunk that duplicates a line: on a file that already has it twice,
	// the longer (new) side is the better evidence.
	diff := "--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n x\n+x\n y\n"
	fp := Match([]byte("x\nx\ny\n"), mustDiff(t, diff)[0])
	if fp.Hunks[0].Status != AlreadyApplied {
		t.Errorf("got %+v", fp.Hunks[0])
	}
}

func TestUnifiedDiff(t *testing.T) {
	tests := []struct{ name, old, new, want string }{
		{"change", "a\nb\nc\nd\ne\nf\ng\nh\n", "a\nb\nc\nD\ne\nf\ng\nh\n",
			"@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n"},
		{"two hunks", numbered(20), strings.Replace(strings.Replace(numbered(20), "l2\n", "L2\n", 1), "l18\n", "", 1),
			"@@ -1,5 +1,5 @@\n l1\n-l2\n+L2\n l3\n l4\n l5\n@@ -15,6 +15,5 @@\n l15\n l16\n l17\n-l18\n l19\n l20\n"},
		{"no newline", "a\nb", "a\nc", "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{"crlf", "a\r\nb\r\n", "a\r\nc\r\n", "@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n"},
	}
	for _, tt := range tests {
		got := string(Unified("f", []byte(tt.old), []byte(tt.new), true, true))
		want := "diff --git a/f b/f\n--- a/f\n+++ b/f\n" + tt.want
		if got != want {
			t.Errorf("%s:\n%s\nwant:\n%s", tt.name, got, want)
		}
		// The diff applies back to produce the new bytes.
		fds, err := Parse(tt.name, []byte(got))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		fp := Match([]byte(tt.old), fds[0])
		if string(fp.New) != tt.new {
			t.Errorf("%s: reapplied %q, want %q", tt.name, fp.New, tt.new)
		}
	}
	got := string(Unified("n", nil, []byte("x\n"), false, true))
	if got != "diff --git a/n b/n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+x\n" {
		t.Errorf("create:\n%s", got)
	}
	got = string(Unified("n", []byte("x\n"), nil, true, false))
	if got != "diff --git a/n b/n\ndeleted file mode 100644\n--- a/n\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n" {
		t.Errorf("delete:\n%s", got)
	}
}

// FuzzMatch checks that a diff made by Hunks applies
// back exactly, and that matching arbitrary bytes never panics.
func FuzzMatch(f *testing.F) {
	f.Add([]byte(numbered(20)), []byte(strings.Replace(numbered(20), "l7\n", "seven\n", 1)))
	f.Add([]byte("a\nb\nc"), []byte("a\nB\nc\nd"))
	f.Add([]byte(""), []byte("x\n"))
	f.Add([]byte("x\nx\nx\n"), []byte("x\nx\nx\nx\n"))
	f.Add([]byte("caf\xe9\n\xff\n"), []byte("caf\xe9\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if bytes.IndexByte(a, '\r') >= 0 || bytes.IndexByte(b, '\r') >= 0 {
			// Line endings follow the target file, not the diff: not an identity.
			_ = Match(a, &FileDiff{OldPath: "f", NewPath: "f", Hunks: nil})
			return
		}
		d := Unified("f", a, b, true, true)
		fds, err := Parse("gen", d)
		if bytes.Equal(a, b) {
			return
		}
		if err != nil {
			t.Fatalf("generated diff does not parse: %v\n%s", err, d)
		}
		fp := Match(a, fds[0])
		for _, h := range fp.Hunks {
			if h.Status != Exact {
				t.Fatalf("hunk %d: %s (%s)\n%s", h.Index, h.Status, h.Reason, d)
			}
		}
		if !bytes.Equal(fp.New, b) {
			t.Fatalf("applied %q, want %q\n%s", fp.New, b, d)
		}
		// The same diff on its own result is already applied, or at least
		// never crashes when it is not (repetitive text can hide it).
		_ = Match(fp.New, fds[0])
		_ = Match(b, fds[0].Reverse())
	})
}

func TestMatchFuzzyBytes(t *testing.T) {
	// Fuzzy on a CRLF file with Latin-1 bytes: the added line gets CRLF,
	// the drifted context line keeps its bytes.
	diff := "--- a/f\n+++ b/f\n@@ -1,7 +1,7 @@\n caf\xe9\n b\n c\n-d\n+D \xff\n e\n f\n g\n"
	old := "caf\xe9 au lait\r\nb\r\nc\r\nd\r\ne\r\nf\r\ng\r\n"
	fp := Match([]byte(old), mustDiff(t, diff)[0])
	if fp.Hunks[0].Status != Fuzzy || string(fp.New) != "caf\xe9 au lait\r\nb\r\nc\r\nD \xff\r\ne\r\nf\r\ng\r\n" {
		t.Errorf("%+v %q", fp.Hunks[0], fp.New)
	}
}

func TestRegionOf(t *testing.T) {
	three := splitText([]byte("a\nb\nc\n"))
	tests := []struct {
		name       string
		t          *text
		start, end int
		want       *Region
	}{
		{"inside", three, 1, 3, &Region{Start: 2, End: 3, Text: "b\nc"}},
		{"past the end shows the last lines", three, 3, 5, &Region{Start: 2, End: 3, Text: "b\nc"}},
		{"one line file, expected after it", splitText([]byte("only\n")), 1, 2, &Region{Start: 1, End: 1, Text: "only"}},
		{"empty width is one line", three, 0, 0, &Region{Start: 1, End: 1, Text: "a"}},
		{"wider than the file", three, 0, 10, &Region{Start: 1, End: 3, Text: "a\nb\nc"}},
		{"empty file", splitText(nil), 0, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := regionOf(tt.t, tt.start, tt.end)
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Fatalf("regionOf(%d, %d) = %+v, want %+v", tt.start, tt.end, got, tt.want)
			}
			if got != nil && got.Start > got.End {
				t.Fatalf("region starts after it ends: %+v", got)
			}
		})
	}
}

// The fuzz policy: a context line missing and a line inserted count the same
// way away from the change (fuzzy, and the reason says which), and both are
// conflicts next to it.
func TestFuzzPolicySymmetric(t *testing.T) {
	fd := mustDiff(t, "--- a/f\n+++ b/f\n@@ -1,7 +1,8 @@\n A\n B\n C\n+X\n D\n E\n F\n G\n")[0]
	for _, tc := range []struct {
		name, file string
		status     HunkStatus
		reason     string
	}{
		{"context line missing", "A\nC\nD\nE\nF\nG\n", Fuzzy, "1 of 7 context lines not found"},
		{"line inserted", "A\nQ\nB\nC\nD\nE\nF\nG\n", Fuzzy, "1 line not in the hunk between its context lines"},
		{"both", "A\nQ\nB\nC\nD\nF\nG\n", Fuzzy, "1 of 7 context lines not found, 1 line not in the hunk between its context lines"},
		{"context line changed", "A\nB2\nC\nD\nE\nF\nG\n", Fuzzy, "1 of 7 context lines changed"},
		{"anchor missing", "A\nB\nD\nE\nF\nG\n", Conflict, "next to the change not found"},
		{"line inserted between anchors", "A\nB\nC\nQ\nD\nE\nF\nG\n", Conflict, "not contiguous"},
	} {
		fp := Match([]byte(tc.file), fd)
		h := fp.Hunks[0]
		if h.Status != tc.status || !strings.Contains(h.Reason, tc.reason) {
			t.Errorf("%s: %v %q, want %v %q", tc.name, h.Status, h.Reason, tc.status, tc.reason)
		}
		if tc.status == Fuzzy && (h.Score < FuzzyMinScore || h.Score >= 1) {
			t.Errorf("%s: score %.2f", tc.name, h.Score)
		}
	}
}

// Both sides of FuzzyMinScore: a region scoring 0.74 is taken, one scoring
// 0.57 is refused. Moving the threshold to 0.3 or 0.8 fails this test.
func TestFuzzyMinScoreBothSides(t *testing.T) {
	ctx := []string{"a1", "a2", "a3", "a4", "a5", "a6", "b1", "b2", "b3", "b4", "b5", "b6"}
	diff := "--- a/f\n+++ b/f\n@@ -1,12 +1,13 @@\n"
	for i, c := range ctx {
		if i == 6 {
			diff += "+X\n"
		}
		diff += " " + c + "\n"
	}
	fd := mustDiff(t, diff)[0]
	above := "z1\nz2\na3\na4\na5\na6\nb1\nb2\nb3\nz3\nz4\nz5\n"
	fp := Match([]byte(above), fd)
	if h := fp.Hunks[0]; h.Status != Fuzzy || h.Score < 0.7 || h.Score > 0.75 {
		t.Errorf("score in (0.6, 0.8): %v %.2f %q, want fuzzy near 0.74", h.Status, h.Score, h.Reason)
	}
	below := "z1\nz2\na3\nz7\na5\na6\nb1\nb2\nz4\nz5\nb5\nz6\n"
	fp = Match([]byte(below), fd)
	if h := fp.Hunks[0]; h.Status != Conflict || !strings.Contains(h.Reason, "only 0.57 similar") {
		t.Errorf("score in (0.3, 0.6): %v %q, want a conflict at 0.57", h.Status, h.Reason)
	}
}

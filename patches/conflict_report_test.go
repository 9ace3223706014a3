package patches

import (
	"github.com/smpatch/smpatch/patches/udiff"

	"strings"
	"testing"
)

// The nearest region of a conflict comes from the file, which may be
// binary or not UTF-8: the report never passes control bytes to the
// terminal.
func TestConflictReportEscapes(t *testing.T) {
	p := &Plan{Patch: &Patch{Name: "demo"}, Files: []*FilePlan{{
		Path: "python/sglang/blob.py",
		Result: udiff.Result{Hunks: []HunkResult{{Status: Conflict, Reason: "no region similar enough",
			Nearest: &Region{Start: 3, End: 4, Text: "\tx = 1\x1b]0;title\a\n\xff\xfe\x00bin\r\n"}}}},
	}}}
	got := ConflictReport(p)
	for _, c := range got {
		if c < 0x20 && c != '\n' && c != '\t' {
			t.Fatalf("control byte %#x in report:\n%q", c, got)
		}
	}
	for _, want := range []string{"    | \tx = 1\\x1b]0;title\\x07\n", "    | \\xff\\xfe\\x00bin\\r\n"} {
		if !strings.Contains(got, want) {
			t.Fatalf("report lacks %q:\n%s", want, got)
		}
	}
}

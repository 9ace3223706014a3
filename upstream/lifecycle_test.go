package upstream

import (
	"strings"
	"testing"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/udiff"
)

// TestAddedLinesThere: a conflicting patch counts as upstream only when
// every hunk's added lines are in the file, in order; a hunk that only
// removes lines, or adds blank ones, proves nothing.
func TestAddedLinesThere(t *testing.T) {
	const diff = "--- a/python/x.py\n+++ b/python/x.py\n@@ -1,2 +1,4 @@\n a\n+b1\n+b2\n c\n@@ -9,2 +11,3 @@\n x\n+y\n z\n"
	fds, err := udiff.Parse("d.diff", []byte(diff))
	if err != nil {
		t.Fatal(err)
	}
	plan := func(old string) *patches.Plan {
		return &patches.Plan{Files: []*patches.FilePlan{{Path: "python/x.py", Result: udiff.Result{Diff: fds[0], Old: []byte(old)}}}}
	}
	for _, tt := range []struct {
		old  string
		want bool
	}{
		{"q\n b1\nb2  \nr\ny\n", true},
		{"b1\nb2\n", false},    // the second hunk's y is missing
		{"b2\nb1\ny\n", false}, // out of order
		{"b1\nq\nb2\ny\n", false},
	} {
		ev := addedLinesThere(plan(tt.old))
		if (ev != nil) != tt.want {
			t.Errorf("%q: evidence %q, want found=%v", tt.old, ev, tt.want)
		}
		if tt.want && (len(ev) != 2 || !strings.HasPrefix(ev[0], "python/x.py:2: the 2 line(s) hunk 1 (d.diff:3) adds are there")) {
			t.Errorf("evidence %q", ev)
		}
	}
	rm, err := udiff.Parse("r.diff", []byte("--- a/python/x.py\n+++ b/python/x.py\n@@ -1,3 +1,3 @@\n a\n-b\n+\n c\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ev := addedLinesThere(&patches.Plan{Files: []*patches.FilePlan{{Path: "python/x.py", Result: udiff.Result{Diff: rm[0], Old: []byte("a\n\nc\n")}}}}); ev != nil {
		t.Errorf("a blank added line proved %q", ev)
	}
}

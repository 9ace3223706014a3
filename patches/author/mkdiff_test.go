package author

import (
	"strings"
	"testing"

	"github.com/smpatch/smpatch/patches/udiff"
)

func TestMakeDiffSection(t *testing.T) {
	old := strings.Join([]string{
		"import os",
		"",
		"class Server:",
		"    def start(self):",
		"        if self.ready:",
		"            run(self)",
		"        return 1",
		"",
		"def _compute_enable_deep_gemm():",
		"    # a comment",
		"    return is_sm90()",
		"",
		"X = 1",
		"if X:",
		"    Y = 2",
		"",
	}, "\n")
	nw := strings.NewReplacer("run(self)", "run(self, fast=True)", "return is_sm90()", "return is_sm90() or is_sm120()", "Y = 2", "Y = 3", "import os", "import sys").Replace(old)
	diff := MakeDiff([]Change{{Path: "python/sglang/a.py", Old: []byte(old), New: []byte(nw)}})
	want := []string{
		"@@ -1,3 +1,3 @@\n",
		"@@ -5,3 +5,3 @@ def start(self):\n",
		"@@ -10,3 +10,3 @@ def _compute_enable_deep_gemm():\n",
		"@@ -14,2 +14,2 @@\n",
	}
	for _, w := range want {
		if !strings.Contains(string(diff), w) {
			t.Errorf("no %q in\n%s", w, diff)
		}
	}
	fds, err := udiff.Parse("a.diff", diff)
	if err != nil {
		t.Fatal(err)
	}
	if got := fds[0].Hunks[1].Section; got != "def start(self):" {
		t.Errorf("parsed section %q", got)
	}
	if !strings.Contains(string(fds[0].Format()), "@@ def start(self):\n") {
		t.Errorf("formatted again:\n%s", fds[0].Format())
	}
	if err := checkDiff("a.diff", diff, []Change{{Path: "python/sglang/a.py", Old: []byte(old), New: []byte(nw)}}); err != nil {
		t.Fatal(err)
	}
	// Not Python: no context after @@.
	c := MakeDiff([]Change{{Path: "csrc/a.cu", Old: []byte(old), New: []byte(nw)}})
	if strings.Contains(string(c), "@@ def") {
		t.Errorf("a .cu file got a Python section:\n%s", c)
	}
}

func TestPySectionLong(t *testing.T) {
	long := "def " + strings.Repeat("é", 60) + "():"
	lines := []string{long, "    a", "    b"}
	h := &udiff.Hunk{OldStart: 2, OldLines: 2, Lines: []string{"    a", "    b"}, Ops: []byte("  ")}
	s := pySection(lines, h)
	if len(s) > maxSection || !strings.HasPrefix(s, "def é") {
		t.Errorf("section %q (%d bytes)", s, len(s))
	}
}

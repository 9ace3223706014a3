package udiff

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// A git diff in the shape of the sm120-fusion change to communicator.py
// (upstream shape C4): a function gate widened, a flag added.
const gitDiffC4 = `From 1234 Mon Sep 17 00:00:00 2001
Subject: [PATCH] sm120 fusion

diff --git a/python/sglang/srt/layers/communicator.py b/python/sglang/srt/layers/communicator.py
index 1111111..2222222 100644
--- a/python/sglang/srt/layers/communicator.py
+++ b/python/sglang/srt/layers/communicator.py
@@ -10,6 +10,7 @@ from sglang.srt.utils import (
 _is_cuda = is_cuda()
 _is_sm90_supported = _is_cuda and is_sm90_supported()
 _is_sm100_supported = _is_cuda and is_sm100_supported()
+_is_sm120_supported = _is_cuda and is_sm120_supported()
 
 
 def apply_flashinfer_allreduce_fusion(batch_size: int):
@@ -20,3 +21,3 @@ def apply_flashinfer_allreduce_fusion(batch_size: int):
     return (
-        (_is_sm90_supported or _is_sm100_supported)
+        (_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)
         and _is_flashinfer_available
diff --git a/python/sglang/srt/new_file.py b/python/sglang/srt/new_file.py
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/python/sglang/srt/new_file.py
@@ -0,0 +1,2 @@
+x = 1
+y = 2
\ No newline at end of file
diff --git a/old.py b/old.py
deleted file mode 100644
index 4444444..0000000
--- a/old.py
+++ /dev/null
@@ -1 +0,0 @@
-gone
diff --git a/run.sh b/run.sh
old mode 100644
new mode 100755
-- 
2.43.0
`

func TestParseDiffGit(t *testing.T) {
	files, err := Parse("c4.diff", []byte(gitDiffC4))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("got %d files, want 4", len(files))
	}
	f := files[0]
	if f.OldPath != "python/sglang/srt/layers/communicator.py" || f.NewPath != f.OldPath {
		t.Errorf("paths %q %q", f.OldPath, f.NewPath)
	}
	if f.Line != 4 || f.Source != "c4.diff" {
		t.Errorf("location %s:%d", f.Source, f.Line)
	}
	if len(f.Hunks) != 2 {
		t.Fatalf("hunks: %d", len(f.Hunks))
	}
	h := f.Hunks[0]
	if h.OldStart != 10 || h.OldLines != 6 || h.NewStart != 10 || h.NewLines != 7 || h.Section != "from sglang.srt.utils import (" || h.Line != 8 {
		t.Errorf("hunk 1 header: %+v", h)
	}
	if string(h.Ops) != "   +   " || h.Lines[3] != "_is_sm120_supported = _is_cuda and is_sm120_supported()" || h.Lines[4] != "" {
		t.Errorf("hunk 1 body: %q %q", h.Ops, h.Lines)
	}
	nf := files[1]
	if !nf.IsCreate() || nf.NewPath != "python/sglang/srt/new_file.py" || nf.NewMode != "100644" || !nf.Hunks[0].NoNewlineNew || nf.Hunks[0].NoNewlineOld {
		t.Errorf("new file: %+v %+v", nf, nf.Hunks[0])
	}
	del := files[2]
	if !del.IsDelete() || del.OldPath != "old.py" || del.Hunks[0].OldStart != 1 || del.Hunks[0].OldLines != 1 {
		t.Errorf("deleted file: %+v", del)
	}
	mode := files[3]
	if mode.OldPath != "run.sh" || mode.NewMode != "100755" || len(mode.Hunks) != 0 {
		t.Errorf("mode change: %+v", mode)
	}
}

func TestParseDiffPlain(t *testing.T) {
	in := "--- a/x.py\t2026-01-01 00:00:00\n+++ b/x.py\t2026-01-01 00:00:01\n@@ -1 +1 @@\n-a\n+b\n--- \"a/sp ace\\303\\251.py\"\n+++ \"b/sp ace\\303\\251.py\"\n@@ -1,2 +1,2 @@\n c\n-d\n+e\n"
	files, err := Parse("p.diff", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].OldPath != "x.py" || files[1].NewPath != "sp aceé.py" {
		t.Fatalf("got %+v", files)
	}
	if h := files[0].Hunks[0]; h.OldLines != 1 || h.NewLines != 1 || h.OldStart != 1 {
		t.Errorf("default count: %+v", h)
	}
}

func TestParseDiffBytes(t *testing.T) {
	// CRLF bodies keep their '\r'; non-UTF-8 bytes pass through; the
	// missing newline of the old side is recorded.
	in := "--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n caf\xe9\r\n-old\r\n\\ No newline at end of file\n+new\r\n"
	files, err := Parse("w.diff", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	h := files[0].Hunks[0]
	if !reflect.DeepEqual(h.Lines, []string{"caf\xe9\r", "old\r", "new\r"}) || !h.NoNewlineOld || h.NoNewlineNew {
		t.Errorf("got %q old=%v new=%v", h.Lines, h.NoNewlineOld, h.NoNewlineNew)
	}
	// A diff written entirely with CRLF parses too.
	crlf := strings.ReplaceAll("diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "\n", "\r\n")
	files, err = Parse("crlf.diff", []byte(crlf))
	if err != nil {
		t.Fatal(err)
	}
	if files[0].OldPath != "x" || files[0].Hunks[0].Lines[0] != "a\r" {
		t.Errorf("crlf diff: %+v %q", files[0], files[0].Hunks[0].Lines)
	}
}

func TestParseDiffErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", "e.diff: no file diffs found"},
		{"prose", "just words\n", "no file diffs found"},
		{"short body", "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n", "e.diff:3: hunk body ends early"},
		{"short body then next", "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+c\ndiff --git a/y b/y\n", "e.diff:7: hunk body ends early"},
		{"long body", "--- a/x\n+++ b/x\n@@ -1,1 +1,1 @@\n-b\n+c\n d\n", "e.diff:6: hunk body longer than its header"},
		{"bad header", "--- a/x\n+++ b/x\n@@ -1,x +1 @@\n", "e.diff:3: malformed hunk header"},
		{"absolute", "--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "e.diff:1: path \"/etc/passwd\" is absolute"},
		{"dotdot", "--- a/../x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n", "e.diff:1: path \"../x\" leaves the tree"},
		{"dotdot inside", "diff --git a/p/../../x b/p/../../x\n--- a/p/../../x\n+++ b/p/../../x\n@@ -1 +1 @@\n-a\n+b\n", "leaves the tree"},
		{"rename", "diff --git a/x b/y\nsimilarity index 90%\nrename from x\nrename to y\n", "e.diff:3: renames and copies are not supported"},
		{"rename plain", "--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n", "renames are not supported"},
		{"binary", "diff --git a/x b/x\nindex 1..2 100644\nBinary files a/x and b/x differ\n", "e.diff:3: binary diffs are not supported"},
		{"no hunks", "--- a/x\n+++ b/x\n", "e.diff:1: x: no hunks"},
		{"stray hunk", "@@ -1 +1 @@\n-a\n+b\n", "e.diff:1: hunk outside a file"},
		{"overlap", "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n c\n@@ -2 +2 @@\n-c\n+d\n", "e.diff:7: hunk overlaps"},
		{"new not at 0", "--- /dev/null\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "must start at -0,0"},
		{"twice", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/x\n+++ b/x\n@@ -5 +5 @@\n-a\n+b\n", "e.diff:6: x: second diff for the same file"},
		{"dev null both", "--- /dev/null\n+++ /dev/null\n@@ -0,0 +0,0 @@\n", "both sides are /dev/null"},
		{"marker first", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n\\ No newline at end of file\n-a\n+b\n", "e.diff:4: \"\\ No newline\" marker before any line"},
	}
	for _, tt := range tests {
		_, err := Parse("e.diff", []byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestReverse(t *testing.T) {
	files, err := Parse("c4.diff", []byte(gitDiffC4))
	if err != nil {
		t.Fatal(err)
	}
	r := files[0].Reverse()
	h := r.Hunks[1]
	if h.OldStart != 21 || h.OldLines != 3 || h.NewStart != 20 || h.NewLines != 3 {
		t.Errorf("reversed header %+v", h)
	}
	if string(h.Ops) != " -+ " || !strings.Contains(h.Lines[1], "_is_sm120_supported") {
		t.Errorf("reversed body %q %q", h.Ops, h.Lines)
	}
	if !reflect.DeepEqual(r.Reverse().Hunks, files[0].Hunks) {
		t.Error("reverse twice is not the identity")
	}
	nr := files[1].Reverse()
	if !nr.IsDelete() || nr.OldPath != "python/sglang/srt/new_file.py" || !nr.Hunks[0].NoNewlineOld {
		t.Errorf("reversed new file: %+v", nr)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	files, err := Parse("c4.diff", []byte(gitDiffC4))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, f := range files {
		b.Write(f.Format())
	}
	again, err := Parse("formatted", b.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	for i := range files {
		if !reflect.DeepEqual(stripLoc(files[i]), stripLoc(again[i])) {
			t.Errorf("file %d differs after Format:\n%+v\n%+v", i, files[i], again[i])
		}
	}
}

// stripLoc drops the fields that name where a diff was read.
func stripLoc(fd *FileDiff) *FileDiff {
	c := *fd
	c.Source, c.Line = "", 0
	c.Hunks = nil
	for _, h := range fd.Hunks {
		hc := *h
		hc.Line, hc.Source = 0, ""
		c.Hunks = append(c.Hunks, &hc)
	}
	return &c
}

func FuzzParseDiff(f *testing.F) {
	f.Add([]byte(gitDiffC4))
	f.Add([]byte("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\r\n-b\n\\ No newline at end of file\n+c\n"))
	f.Add([]byte("--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+\xff\xfe\n"))
	f.Add([]byte("diff --git \"a/q\\\"x\" \"b/q\\\"x\"\n--- \"a/q\\\"x\"\n+++ \"b/q\\\"x\"\n@@ -3 +3,0 @@\n-z\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := Parse("fuzz", data)
		if err != nil {
			return
		}
		var b bytes.Buffer
		for _, fd := range files {
			for _, h := range fd.Hunks {
				oldN, newN := 0, 0
				for _, op := range h.Ops {
					if op != '+' {
						oldN++
					}
					if op != '-' {
						newN++
					}
				}
				if oldN != h.OldLines || newN != h.NewLines {
					t.Fatalf("hunk at line %d: body -%d +%d, header -%d +%d", h.Line, oldN, newN, h.OldLines, h.NewLines)
				}
			}
			for _, p := range []string{fd.OldPath, fd.NewPath} {
				if strings.HasPrefix(p, "/") || strings.Contains("/"+p+"/", "/../") {
					t.Fatalf("path %q accepted", p)
				}
			}
			r := fd.Reverse()
			for i, h := range fd.Hunks {
				o, n := hunkSides(h)
				ro, rn := hunkSides(r.Hunks[i])
				if !reflect.DeepEqual(o, rn) || !reflect.DeepEqual(n, ro) {
					t.Fatalf("reverse of hunk %d does not swap its sides", i)
				}
			}
			b.Write(fd.Format())
			_ = Match(data, fd)
		}
		again, err := Parse("formatted", b.Bytes())
		if err != nil {
			t.Fatalf("formatted diff does not parse: %v\n%q", err, b.String())
		}
		if len(again) != len(files) {
			t.Fatalf("formatted diff has %d files, want %d", len(again), len(files))
		}
	})
}

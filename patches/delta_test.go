package patches

import (
	"github.com/smpatch/smpatch/patches/catalog"

	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/source"
)

// pyLines is n lines of Python-shaped text, each different, joined by eol.
func pyLines(n int, eol string) string {
	var b strings.Builder
	for i := range n {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "def handler_%d(self, batch):%s", i, eol)
		case 1:
			fmt.Fprintf(&b, "    if batch.size > %d and self.enabled:%s", i*7, eol)
		case 2:
			fmt.Fprintf(&b, "        return self.run_%d(batch)  # step %d%s", i, i, eol)
		default:
			b.WriteString(eol)
		}
	}
	return b.String()
}

// replaced replaces, in s, the first occurrence of each old with its new.
func replaced(t *testing.T, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("fixture has no %q", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

func TestDeltaRoundTrip(t *testing.T) {
	base := pyLines(2000, "\n")
	crlf := pyLines(2000, "\r\n")
	big := strings.Repeat("x", 40<<10) + "\n"
	long := pyLines(4000, "\n")
	cases := []struct {
		name     string
		old, new string
		ok       bool
		maxLen   int // at most this many bytes of delta, when ok
	}{
		{"one line changed", base, replaced(t, base, "batch.size > 7 ", "batch.size >= 7 "), true, 100},
		{"multi-hunk", base, replaced(t, base,
			"def handler_400(", "def handler_400_renamed(",
			"        return self.run_902(batch)  # step 902\n", "        return self.run_902(batch, fast=True)  # step 902\n        self.count += 1\n",
			"    if batch.size > 9107 and self.enabled:\n", "",
			"def handler_1600(self, batch):\n", "# sm120 only\ndef handler_1600(self, batch):\n"), true, 400},
		{"hunk at the start", base, "import os\n" + strings.TrimPrefix(base, "def handler_0(self, batch):\n"), true, 100},
		{"hunk at the end", base, strings.TrimSuffix(base, "\n") + "\n# trailer\nX = 1\n", true, 100},
		{"old end cut", base, base[:len(base)-200], true, 100},
		{"CRLF", crlf, replaced(t, crlf, "batch.size > 707 ", "batch.size > 708 ", "run_1002(batch)", "run_1002(batch, crlf=True)"), true, 200},
		{"no final newline in new", base, strings.TrimSuffix(base, "\n"), true, 100},
		{"no final newline in old", strings.TrimSuffix(base, "\n"), base + "x = 2", true, 100},
		{"identical", base, base, true, 60},
		{"long insertion", long, replaced(t, long, "def handler_1000(", strings.Repeat("# pad line\n", 2000)+"def handler_1000("), true, 23 << 10},
		{"long deletion", long, long[:20000] + long[60000:], true, 100},
		{"long replacement", long, long[:20000] + strings.Repeat("# pad line\n", 1000) + long[60000:], true, 12 << 10},
		{"repeated lines", strings.Repeat("\n", 5000) + base + strings.Repeat("    pass\n", 3000), strings.Repeat("\n", 4990) + base + strings.Repeat("    pass\n", 2999) + "    return\n", true, 200},
		{"long line", big, replaced(t, big, "xxxx\n", "xxxy\n"), true, 100},
		{"whole-file rewrite", base, pyLines(2000, "\r\n"), false, 0},
		{"unrelated", base, strings.ToUpper(base), false, 0},
		{"empty old", "", base, false, 0},
		{"empty new", base, "", false, 0},
		{"both empty", "", "", false, 0},
		{"tiny file", "a = 1\n", "a = 2\n", false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, ok := encodeDelta([]byte(c.old), []byte(c.new))
			if ok != c.ok {
				t.Fatalf("ok = %v (%d bytes of delta for %d), want %v", ok, len(d), len(c.new), c.ok)
			}
			if !ok {
				if d != nil {
					t.Fatal("a delta returned with ok false")
				}
				return
			}
			if len(d) > c.maxLen {
				t.Errorf("%d bytes of delta, want at most %d:\n%.400s", len(d), c.maxLen, d)
			}
			got, err := decodeDelta([]byte(c.old), d, maxCopyBytes)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, []byte(c.new)) {
				t.Fatalf("decoded %d bytes differ from the %d of new", len(got), len(c.new))
			}
		})
	}
}

// A delta that is not exactly in the format, or would make more than it
// may, is refused with one line saying where, never decoded in part.
func TestDecodeDeltaRefuses(t *testing.T) {
	old := []byte("0123456789\nabcdefghij\n") // 22 bytes
	cases := []struct{ delta, want string }{
		{"", `not a delta (no "smpatch-delta 1" header line)`},
		{"smpatch-delta 2 22 5\n", `not a delta (no "smpatch-delta 1" header line)`},
		{"smpatch-delta 1 22 5", `not a delta (no "smpatch-delta 1" header line)`},
		{"smpatch-delta 1 22\n", `delta header "smpatch-delta 1 22": not two lengths`},
		{"smpatch-delta 1 022 5\n", `delta header "smpatch-delta 1 022 5": not two lengths`},
		{"smpatch-delta 1 22 -5\n", `delta header "smpatch-delta 1 22 -5": not two lengths`},
		{"smpatch-delta 1 21 5\n", "delta made against an original of 21 bytes, the original has 22"},
		{"smpatch-delta 1 22 100\nC 0 22\n", "delta makes 100 bytes, more than the 64 a copy may have"},
		{"smpatch-delta 1 22 60\nC 0 22\n", "delta claims 60 bytes, more than its original and its own 29 bytes can make"},
		{"smpatch-delta 1 22 999999999999999\n", "delta makes 999999999999999 bytes, more than the 64 a copy may have"},
		{"smpatch-delta 1 22 5\nC 0 9999999999999999\n", `delta byte 21: bad copy "C 0 9999999999999999"`},
		{"smpatch-delta 1 22 5\nC 20 5\n", "delta byte 21: copy of 5 bytes from 20 runs past the original's 22"},
		{"smpatch-delta 1 22 5\nC 999999999999999 5\n", "delta byte 21: copy of 5 bytes from 999999999999999 runs past the original's 22"},
		{"smpatch-delta 1 22 10\nC 10 5\nC 0 5\n", "delta byte 29: copy from 0 goes back before 15"},
		{"smpatch-delta 1 22 5\nC 0 0\n", `delta byte 21: bad copy "C 0 0"`},
		{"smpatch-delta 1 22 5\nI 9\nab", "delta byte 21: insert of 9 bytes, 2 left"},
		{"smpatch-delta 1 22 2\nI 0\n", `delta byte 21: bad insert "I 0"`},
		{"smpatch-delta 1 22 5\nC 0 3\n", "delta makes 3 bytes, its header says 5"},
		{"smpatch-delta 1 22 5\nC 0 6\n", "delta byte 21: makes more than the 5 bytes its header says"},
		{"smpatch-delta 1 22 5\nX 0 6\n", `delta byte 21: unknown operation "X 0 6"`},
		{"smpatch-delta 1 22 5\nC 0 5", "delta byte 21: operation line not ended"},
		{"smpatch-delta 1 22 5\n" + strings.Repeat("C", 70) + "\n", "delta byte 21: operation line not ended"},
	}
	for _, c := range cases {
		got, err := decodeDelta(old, []byte(c.delta), 64)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: got %q, %v; want error %q", c.delta, got, err, c.want)
		}
	}
	// And the good one, for contrast.
	got, err := decodeDelta(old, []byte("smpatch-delta 1 22 9\nC 1 3\nI 2\nXYC 11 4\n"), 64)
	if err != nil || string(got) != "123XYabcd" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// FuzzDelta: whatever old and new are, a delta the encoder keeps decodes
// to new exactly and is smaller than new; and the decoder, given any
// bytes, returns an error or at most the bytes it was allowed, never
// panicking. new is also made from old by the edits the input describes,
// so that most runs take the encoder's keeping path.
func FuzzDelta(f *testing.F) {
	base := []byte(pyLines(300, "\n"))
	f.Add(base, []byte("\x10\x00\x05inserted\n"))
	f.Add(base, []byte("\x00\x20\x00"))
	f.Add([]byte(pyLines(300, "\r\n")), []byte("\x7f\x01\x02xy\x30\x00\x01z"))
	f.Add([]byte("a\nb\nc\n"), []byte("a\nB\nc\n"))
	f.Add([]byte{}, []byte("smpatch-delta 1 0 1\nI 1\nx"))
	f.Add([]byte("0123456789"), []byte("smpatch-delta 1 10 4\nC 2 2\nI 2\nzzC 8 2\n"))
	f.Fuzz(func(t *testing.T, old, data []byte) {
		check := func(new []byte) {
			d, ok := encodeDelta(old, new)
			if !ok {
				return
			}
			if len(d) > len(new)/2 {
				t.Fatalf("kept a delta of %d bytes for %d", len(d), len(new))
			}
			got, err := decodeDelta(old, d, len(new))
			if err != nil || !bytes.Equal(got, new) {
				t.Fatalf("delta %q of %q -> %q decodes to %q, %v", d, old, new, got, err)
			}
		}
		check(data)
		check(editBy(old, data))
		const max = 1 << 10
		if got, err := decodeDelta(old, data, max); err == nil && len(got) > max {
			t.Fatalf("decoded %d bytes, more than the %d allowed", len(got), max)
		}
	})
}

// editBy makes a new file from old by the edits script describes, three
// bytes at a time: where (a fraction of old, from the last edit on), how
// many bytes to drop, how many to insert (taken from the script itself).
func editBy(old, script []byte) []byte {
	var out []byte
	at := 0
	for len(script) >= 3 {
		where, drop, ins := int(script[0]), int(script[1]), int(script[2])
		script = script[3:]
		n := at + (len(old)-at)*where/256
		out = append(out, old[at:n]...)
		at = min(n+drop, len(old))
		ins = min(ins, len(script))
		out = append(out, script[:ins]...)
		script = script[ins:]
	}
	return append(out, old[at:]...)
}

func BenchmarkEncodeDelta(b *testing.B) {
	old := []byte(pyLines(5000, "\n")) // ~150 KB
	new := []byte(strings.Replace(strings.Replace(string(old), "def handler_40(", "import x\ndef handler_40(", 1), "run_4002(batch)", "run_4002(batch, sm120=True)", 1))
	b.SetBytes(int64(len(new)))
	for b.Loop() {
		if _, ok := encodeDelta(old, new); !ok {
			b.Fatal("not kept")
		}
	}
}

// bigEngineTree is engineTree with each file long enough that its patched
// copy is kept as a delta.
func bigEngineTree(t *testing.T) (string, source.WritableTree, map[string]string) {
	t.Helper()
	root, tr := engineTree(t)
	orig := map[string]string{}
	for _, rel := range []string{commPath, argsPath} {
		p := filepath.Join(root, filepath.FromSlash(rel))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, pyLines(400, "\n")...)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		orig[rel] = string(b)
	}
	return root, tr, orig
}

// The patched copy of a changed file is a delta against its original; it
// serves revert's diff of a file edited since, and revert --force.
func TestPatchedCopyIsDelta(t *testing.T) {
	ctx := context.Background()
	root, tr, orig := bigEngineTree(t)
	if _, err := apply(t, enginePatch(t), tr); err != nil {
		t.Fatal(err)
	}
	names := tarFiles(t, filepath.Join(root, source.StateDirName, "demo.patched.tar"))
	for _, rel := range []string{commPath, argsPath} {
		if d, ok := names[rel+deltaSuffix]; !ok || len(d) > 200 {
			t.Fatalf("demo.patched.tar holds %v, want %s as a small delta", names, rel+deltaSuffix)
		}
		if _, ok := names[rel]; ok {
			t.Fatalf("demo.patched.tar holds %s whole too", rel)
		}
	}
	commFile := filepath.Join(root, filepath.FromSlash(commPath))
	patched, _ := os.ReadFile(commFile)
	if err := os.WriteFile(commFile, append(patched, "# local edit\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Revert(ctx, tr, nil, nil, RevertOptions{})
	if exit.Code(err) != exit.RevertRefused {
		t.Fatalf("revert of an edited file: %v", err)
	}
	var diff string
	for _, f := range res.Patches[0].Files {
		if f.Path == commPath {
			diff = f.Diff
		}
	}
	// The diff is against the patched bytes: only the edit shows.
	if !strings.Contains(diff, "\n+# local edit\n") || strings.Count(diff, "\n+") != 2 || strings.Count(diff, "\n-") != 1 {
		t.Fatalf("diff of the edit:\n%s", diff)
	}
	if _, err := Revert(ctx, tr, nil, nil, RevertOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(commFile); string(b) != orig[commPath]+"# local edit\n" {
		t.Fatalf("revert --force left:\n%s", b)
	}
	if b, _ := tr.ReadFile(argsPath); string(b) != orig[argsPath] {
		t.Fatal("server_args.py not restored")
	}
}

// An entry replaced by a new apply carries the files the new plan does
// not write, with their copies: the patched copy comes back from its
// delta and is kept as a delta again.
func TestPatchedDeltaCarried(t *testing.T) {
	ctx := context.Background()
	root, tr, orig := bigEngineTree(t)
	p := enginePatch(t)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	commFile := filepath.Join(root, filepath.FromSlash(commPath))
	if err := os.WriteFile(commFile, []byte(orig[commPath]), 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := apply(t, p, tr); err != nil || len(res.Notices) != 1 {
		t.Fatalf("apply over a partly stale entry: %v %v", res, err)
	}
	names := tarFiles(t, filepath.Join(root, source.StateDirName, "demo.patched.tar"))
	if _, ok := names[argsPath+deltaSuffix]; !ok || len(names) != 2 {
		t.Fatalf("demo.patched.tar after the carry holds %v", names)
	}
	argsFile := filepath.Join(root, filepath.FromSlash(argsPath))
	patched, _ := os.ReadFile(argsFile)
	if err := os.WriteFile(argsFile, append([]byte("# top\n"), patched...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Revert(ctx, tr, nil, nil, RevertOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(argsFile); string(b) != "# top\n"+orig[argsPath] {
		t.Fatalf("revert --force of the carried file left:\n%s", b)
	}
}

// A file whose name is another changed file's name plus ".delta" keeps
// that name for its own copy: the other's patched copy is kept whole.
func TestPatchedDeltaNameTaken(t *testing.T) {
	root, tr, _ := bigEngineTree(t)
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(commPath+deltaSuffix)), []byte(pyLines(400, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	diff := engineDiff + "diff --git a/" + commPath + ".delta b/" + commPath + ".delta\n--- a/" + commPath + ".delta\n+++ b/" + commPath + ".delta\n" +
		"@@ -1,2 +1,2 @@\n-def handler_0(self, batch):\n+def handler_0(self, batch, x):\n     if batch.size > 7 and self.enabled:\n"
	ps, err := catalog.LoadFS(catFS(map[string]string{"demo.toml": engineTOML, "demo/a.diff": diff}), "cat", "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apply(t, ps[0], tr); err != nil {
		t.Fatal(err)
	}
	names := tarFiles(t, filepath.Join(root, source.StateDirName, "demo.patched.tar"))
	if _, ok := names[commPath]; !ok || names[commPath+deltaSuffix+deltaSuffix] == "" || names[argsPath+deltaSuffix] == "" || len(names) != 3 {
		t.Fatalf("demo.patched.tar holds %v", names)
	}
	j, err := openJournal(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	for _, rel := range []string{commPath, commPath + deltaSuffix, argsPath} {
		b, err := j.readBlob("patched", "demo", rel)
		cur, _ := tr.ReadFile(rel)
		if err != nil || !bytes.Equal(b, cur) {
			t.Fatalf("%s: patched copy %d bytes (%v), the file %d", rel, len(b), err, len(cur))
		}
	}
}

// A damaged patched copy kept as a delta is "journal damaged", with the
// same words as a damaged copy kept whole; a missing one is not there.
func TestPatchedDeltaHostile(t *testing.T) {
	commOld := commOrig + pyLines(400, "\n")
	good, ok := encodeDelta([]byte(commOld), []byte(replaced(t, commOld, "_is_sm90_supported = is_sm90()\n", "_is_sm90_supported = is_sm90()\n_is_sm120_supported = is_sm120()\n",
		"    return _is_sm90_supported\n", "    return _is_sm90_supported or _is_sm120_supported\n")))
	if !ok {
		t.Fatal("fixture delta not kept")
	}
	other := bytes.Replace(good, []byte("is_sm120"), []byte("is_sm121"), 1)
	hexRE := "[0-9a-f]{12}"
	cases := []struct {
		name    string
		entries map[string][]byte // the patched tar's entries for comm.py; nil: no tar
		noOrig  bool              // the original copies removed
		want    string            // regexp of the error; "" for fs.ErrNotExist
	}{
		{"decodes to other bytes", map[string][]byte{commPath + deltaSuffix: other},
			false, `demo\.patched\.tar: journal damaged: the copy of python/sglang/srt/layers/comm\.py has sha256 ` + hexRE + `, the journal recorded ` + hexRE + `$`},
		{"truncated", map[string][]byte{commPath + deltaSuffix: good[:len(good)-30]},
			false, `demo\.patched\.tar: journal damaged: the copy of python/sglang/srt/layers/comm\.py: delta byte [0-9]+: insert of [0-9]+ bytes, [0-9]+ left$`},
		{"huge length", map[string][]byte{commPath + deltaSuffix: fmt.Appendf(nil, "smpatch-delta 1 %d 68000000\nC 0 %d\n", len(commOld), len(commOld))},
			false, `demo\.patched\.tar: journal damaged: the copy of python/sglang/srt/layers/comm\.py: delta makes 68000000 bytes, more than the 67108864 a copy may have$`},
		{"huge copy", map[string][]byte{commPath + deltaSuffix: fmt.Appendf(nil, "smpatch-delta 1 %d 5\nC 0 999999999999999\n", len(commOld))},
			false, `demo\.patched\.tar: journal damaged: the copy of python/sglang/srt/layers/comm\.py: delta byte [0-9]+: copy of 999999999999999 bytes from 0 runs past the original's [0-9]+$`},
		{"delta and whole copy", map[string][]byte{commPath + deltaSuffix: good, commPath: []byte("x")},
			false, `demo\.patched\.tar: journal damaged: "python/sglang/srt/layers/comm\.py" and "python/sglang/srt/layers/comm\.py\.delta" both present: one copy of python/sglang/srt/layers/comm\.py, kept whole or as a delta$`},
		{"no original copy", map[string][]byte{commPath + deltaSuffix: good},
			true, `demo\.patched\.tar: journal damaged: the copy of python/sglang/srt/layers/comm\.py is a delta against its original, and the journal has no copy of the original$`},
		{"no copy", map[string][]byte{argsPath: []byte("x")}, false, ""},
		{"no tar", nil, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, tr := engineTree(t)
			if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(commPath)), []byte(commOld), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := apply(t, enginePatch(t), tr); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(root, source.StateDirName)
			tp := filepath.Join(dir, "demo.patched.tar")
			os.Remove(tp)
			if c.entries != nil {
				var b bytes.Buffer
				w := tar.NewWriter(&b)
				for n, data := range c.entries {
					w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: n, Mode: 0o644, Size: int64(len(data))})
					w.Write(data)
				}
				w.Close()
				if err := os.WriteFile(tp, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.noOrig {
				os.Remove(filepath.Join(dir, "demo.orig.tar"))
			}
			j, err := openJournal(context.Background(), tr)
			if err != nil {
				t.Fatal(err)
			}
			defer j.close()
			b, err := j.readBlob("patched", "demo", commPath)
			if c.want == "" {
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("got %d bytes, %v; want not there", len(b), err)
				}
				return
			}
			var je *JournalError
			if !errors.As(err, &je) || !regexp.MustCompile(c.want).MatchString(err.Error()) {
				t.Fatalf("got %d bytes, %v\nwant %s", len(b), err, c.want)
			}
		})
	}
}

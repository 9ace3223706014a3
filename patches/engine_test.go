package patches

import (
	"github.com/smpatch/smpatch/patches/journal"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
)

// The engine fixture: a tiny sglang checkout whose two files stand for the
// C4 communicator gate and the S3 auto-enable (synthetic, not upstream text),
// and a two-file patch that widens both.
const (
	commPath = "python/sglang/srt/layers/comm.py"
	argsPath = "python/sglang/srt/server_args.py"
	commOrig = `_is_sm90_supported = is_sm90()
def gate():
    return _is_sm90_supported
`
	argsOrig = `def adjust(self):
    if is_sm90_supported():
        self.enable_fusion = True
`
	engineTOML = `name = "demo"
project = "sglang"
[[variant]]
name = "v1"
versions = ">= 0.5.0"
diffs = ["demo/a.diff"]
[[verify]]
file = "python/sglang/srt/layers/comm.py"
contains = "_is_sm120_supported"
`
	// commDiff widens comm.py's gate.
	commDiff = `diff --git a/python/sglang/srt/layers/comm.py b/python/sglang/srt/layers/comm.py
--- a/python/sglang/srt/layers/comm.py
+++ b/python/sglang/srt/layers/comm.py
@@ -1,3 +1,4 @@
 _is_sm90_supported = is_sm90()
+_is_sm120_supported = is_sm120()
 def gate():
-    return _is_sm90_supported
+    return _is_sm90_supported or _is_sm120_supported
`
	engineDiff = commDiff + `diff --git a/python/sglang/srt/server_args.py b/python/sglang/srt/server_args.py
--- a/python/sglang/srt/server_args.py
+++ b/python/sglang/srt/server_args.py
@@ -1,3 +1,3 @@
 def adjust(self):
-    if is_sm90_supported():
+    if is_sm90_supported() or is_sm120_supported():
         self.enable_fusion = True
`
)

func engineTree(t testing.TB) (string, source.WritableTree) {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"python/sglang/__init__.py": "",
		"python/sglang/version.py":  "__version__ = \"0.5.6\"\n",
		commPath:                    commOrig,
		argsPath:                    argsOrig,
	}
	for k, v := range files {
		p := filepath.Join(root, filepath.FromSlash(k))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := source.OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, tr
}

// catFS is a catalog directory in memory.
func catFS(files map[string]string) fstest.MapFS {
	m := fstest.MapFS{}
	for k, v := range files {
		m[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return m
}

// writeCatalog writes a catalog directory.
func writeCatalog(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for k, v := range files {
		p := filepath.Join(dir, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// loadCatalog is the catalog of dirs with builtin's patches as built-ins.
func loadCatalog(builtin fs.FS, dirs []string) (*Catalog, error) { return catalog.New(builtin, dirs) }

func enginePatch(t testing.TB) *Patch {
	t.Helper()
	ps, err := catalog.LoadFS(catFS(map[string]string{"demo.toml": engineTOML, "demo/a.diff": engineDiff}), "cat", "test")
	if err != nil {
		t.Fatal(err)
	}
	return ps[0]
}

func engineCatalog(t testing.TB) *Catalog {
	t.Helper()
	dir := t.TempDir()
	writeCatalog(t, dir, map[string]string{"demo.toml": engineTOML, "demo/a.diff": engineDiff})
	c, err := loadCatalog(nil, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// snapshot hashes every file of the tree except the journal.
func snapshot(t testing.TB, root string) map[string]string { return snapshotOf(t, root, false) }

// journalSnapshot is every file of the tree, the journal's too, by hash,
// and every file and directory by its change time: a command that writes
// anything (a file, a lock, a directory entry) changes it.
func journalSnapshot(t testing.TB, root string) map[string]string { return snapshotOf(t, root, true) }

func snapshotOf(t testing.TB, root string, all bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == source.StateDirName && !all {
			return fs.SkipDir
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if all {
			st, err := os.Lstat(p)
			if err != nil {
				return err
			}
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				out[rel+" (ctime)"] = fmt.Sprint(sys.Ctim.Nano())
			}
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			// Never read through a link, a named pipe or a device.
			l, _ := os.Readlink(p)
			out[rel] = d.Type().String() + " " + l
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(h[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func diffSnap(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func plan(t testing.TB, p *Patch, tr source.Tree) *Plan {
	t.Helper()
	pl, err := NewPlan(context.Background(), p, tr, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func apply(t testing.TB, p *Patch, tr source.WritableTree) (*ApplyResult, error) {
	t.Helper()
	return Apply(context.Background(), tr, setOf(tr, plan(t, p, tr)), ApplyOptions{ToolVersion: "test"})
}

func TestApplyStatusRevert(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	cat := engineCatalog(t)
	orig := snapshot(t, root)
	pyc := filepath.Join(root, "python/sglang/srt/layers/__pycache__")
	os.MkdirAll(pyc, 0o755)
	os.WriteFile(filepath.Join(pyc, "comm.cpython-312.pyc"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(pyc, "comm_ops.cpython-312.pyc"), []byte("x"), 0o644)
	orig = snapshot(t, root)

	res, err := apply(t, p, tr)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Patches) != 1 || res.Patches[0].Status != "applied" {
		t.Fatalf("result %+v", res.Patches[0])
	}
	if _, err := os.Stat(filepath.Join(pyc, "comm.cpython-312.pyc")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("stale pyc kept")
	}
	if _, err := os.Stat(filepath.Join(pyc, "comm_ops.cpython-312.pyc")); err != nil {
		t.Fatal("another module's pyc removed")
	}
	b, _ := tr.ReadFile(commPath)
	if !strings.Contains(string(b), "_is_sm120_supported") {
		t.Fatal("not patched")
	}
	st, err := Status(ctx, tr, cat, journal.Options{})
	if err != nil || len(st.Patches) != 1 || !st.Patches[0].Clean || st.Patches[0].CatalogChanged {
		t.Fatalf("status %+v %v", st, err)
	}
	// Twice: already applied, nothing written.
	patched := snapshot(t, root)
	res, err = apply(t, p, tr)
	if err != nil || res.Patches[0].Status != "already-applied" {
		t.Fatalf("second apply: %+v %v", res, err)
	}
	if !sameSnap(patched, snapshot(t, root)) {
		t.Fatal("second apply changed the tree")
	}
	rr, err := Revert(ctx, tr, cat, nil, RevertOptions{})
	if err != nil || len(rr.Patches) != 1 {
		t.Fatalf("revert: %+v %v", rr, err)
	}
	os.WriteFile(filepath.Join(pyc, "comm.cpython-312.pyc"), []byte("x"), 0o644) // the pyc went away on apply
	if d := diffSnap(orig, snapshot(t, root)); d != "" {
		t.Fatalf("revert left differences: %s", d)
	}
	if _, err := os.Stat(filepath.Join(root, source.StateDirName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("journal directory left after the last revert")
	}
	rr, err = Revert(ctx, tr, cat, []string{"demo"}, RevertOptions{})
	if err != nil || len(rr.NotApplied) != 1 {
		t.Fatalf("revert of nothing: %+v %v", rr, err)
	}
	if _, err := Revert(ctx, tr, cat, []string{"dmeo"}, RevertOptions{}); err == nil || !strings.Contains(err.Error(), "did you mean") {
		t.Fatalf("unknown name: %v", err)
	}
}

func TestRevertDrift(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	cat := engineCatalog(t)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(root, commPath)
	b, _ := os.ReadFile(full)
	edited := append([]byte("# my edit\n"), b...)
	os.WriteFile(full, edited, 0o644)
	before := snapshot(t, root)
	_, err := Revert(ctx, tr, cat, nil, RevertOptions{})
	var de *RevertRefusedError
	if !errors.As(err, &de) {
		t.Fatalf("want a refusal (5), got %v", err)
	}
	if f := de.Result.Patches[0].Files; !strings.Contains(f[0].Diff+f[1].Diff, "+# my edit") {
		t.Fatalf("drift diff does not show the edit: %+v", f)
	}
	if !sameSnap(before, snapshot(t, root)) {
		t.Fatal("refused revert changed the tree")
	}
	if _, err := Revert(ctx, tr, cat, nil, RevertOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(full)
	if string(got) != "# my edit\n"+commOrig {
		t.Fatalf("forced revert: %q", got)
	}
	if a, _ := tr.ReadFile(argsPath); string(a) != argsOrig {
		t.Fatal("untouched file not restored")
	}
}

func TestApplyReadOnlyChangesNothing(t *testing.T) {
	root, tr := engineTree(t)
	p := enginePatch(t)
	before := snapshot(t, root)
	if err := os.Chmod(filepath.Join(root, argsPath), 0o444); err != nil {
		t.Fatal(err)
	}
	_, err := apply(t, p, tr)
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("read-only file: %v", err)
	}
	if !sameSnap(before, snapshot(t, root)) {
		t.Fatal("tree changed")
	}
	if _, err := os.Stat(filepath.Join(root, source.StateDirName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("journal directory created on a refused apply")
	}
	os.Chmod(filepath.Join(root, argsPath), 0o644)
	dir := filepath.Join(root, "python/sglang/srt/layers")
	os.Chmod(dir, 0o555)
	defer os.Chmod(dir, 0o755)
	if _, err := apply(t, p, tr); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("read-only dir: %v", err)
	}
	if !sameSnap(before, snapshot(t, root)) {
		t.Fatal("tree changed")
	}
}

func TestApplyConflictChangesNothing(t *testing.T) {
	root, tr := engineTree(t)
	p := enginePatch(t)
	os.WriteFile(filepath.Join(root, argsPath), []byte("def adjust(self):\n    pass\n"), 0o644)
	before := snapshot(t, root)
	_, err := apply(t, p, tr)
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("want a conflict (4): %v", err)
	}
	if !strings.Contains(ConflictReport(ce.Problem.Plan), "conflict: "+argsPath+" hunk #1") {
		t.Fatalf("report: %s", ConflictReport(ce.Problem.Plan))
	}
	if !sameSnap(before, snapshot(t, root)) {
		t.Fatal("tree changed")
	}
}

// A verify rule that fails after writing rolls everything back.
func TestApplyVerifyFailureRollsBack(t *testing.T) {
	root, tr := engineTree(t)
	p := enginePatch(t)
	p.Verify = append(p.Verify, VerifyRule{File: argsPath, Contains: "never there"})
	before := snapshot(t, root)
	if _, err := apply(t, p, tr); err == nil || !strings.Contains(err.Error(), "never there") {
		t.Fatalf("verify: %v", err)
	}
	if !sameSnap(before, snapshot(t, root)) {
		t.Fatalf("tree changed: %s", diffSnap(before, snapshot(t, root)))
	}
}

// Fault injection: the process "dies" at each step of apply and revert; the
// next command must leave the tree original or fully patched, and say so.
func TestCrashFaultInjection(t *testing.T) {
	ctx := context.Background()
	steps := []string{"before-pending", "write:0", "write:1", "after-writes", "revert-write:0", "revert-write:1"}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			root, tr := engineTree(t)
			p := enginePatch(t)
			cat := engineCatalog(t)
			orig := snapshot(t, root)
			reverting := strings.HasPrefix(step, "revert")
			var patched map[string]string
			if reverting {
				if _, err := apply(t, p, tr); err != nil {
					t.Fatal(err)
				}
				patched = snapshot(t, root)
			}
			journal.Hook = func(s string) error {
				if s == step {
					return journal.ErrCrash
				}
				return nil
			}
			var err error
			if reverting {
				_, err = Revert(ctx, tr, cat, nil, RevertOptions{})
			} else {
				_, err = apply(t, p, tr)
			}
			journal.Hook = nil
			if !errors.Is(err, journal.ErrCrash) {
				t.Fatalf("hook did not fire: %v", err)
			}
			_ = patched
			notes, err := recoverJournal(ctx, tr)
			if err != nil {
				t.Fatal(err)
			}
			now := snapshot(t, root)
			if !sameSnap(orig, now) {
				t.Fatalf("after recovery the tree is not original: %s", diffSnap(orig, now))
			}
			st, _ := ReadState(ctx, tr)
			if len(st.Patches) != 0 {
				t.Fatalf("journal still lists %v", st.Patches[0].Name)
			}
			if step != "before-pending" && len(notes) != 1 {
				t.Fatalf("the user was not told: %v", notes)
			}
		})
	}
	// A write error (not a crash) between files rolls back at once.
	root, tr := engineTree(t)
	p := enginePatch(t)
	orig := snapshot(t, root)
	journal.Hook = func(s string) error {
		if s == "write:1" {
			return errors.New("disk full")
		}
		return nil
	}
	_, err := apply(t, p, tr)
	journal.Hook = nil
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("error: %v", err)
	}
	if !sameSnap(orig, snapshot(t, root)) {
		t.Fatal("tree changed")
	}
}

// Two applies at once on one tree: one writes, the other waits and finds it
// applied; the files are never interleaved.
func TestConcurrentApply(t *testing.T) {
	root, tr := engineTree(t)
	p := enginePatch(t)
	p1, p2 := plan(t, p, tr), plan(t, p, tr)
	var wg sync.WaitGroup
	results := make([]*ApplyResult, 2)
	errs := make([]error, 2)
	for i, pl := range []*Plan{p1, p2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr2, err := source.OpenCheckout(root)
			if err != nil {
				errs[i] = err
				return
			}
			results[i], errs[i] = Apply(context.Background(), tr2, setOf(tr2, pl), ApplyOptions{})
		}()
	}
	wg.Wait()
	statuses := map[string]int{}
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("apply %d: %v", i, errs[i])
		}
		statuses[results[i].Patches[0].Status]++
	}
	if statuses["applied"] != 1 || statuses["already-applied"] != 1 {
		t.Fatalf("statuses %v", statuses)
	}
	b, _ := os.ReadFile(filepath.Join(root, commPath))
	if strings.Count(string(b), "_is_sm120_supported = is_sm120()") != 1 {
		t.Fatalf("interleaved: %q", b)
	}
	st, _ := ReadState(context.Background(), tr)
	if len(st.Patches) != 1 {
		t.Fatal(fmt.Sprint("journal entries: ", len(st.Patches)))
	}
}

// Two patches on the same file in one call: the second is planned again on
// the first one's result; revert with no names takes both out, newest first.
func TestApplyTwoPatchesOneFile(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	orig := snapshot(t, root)
	second := `name = "demo2"
project = "sglang"
[[variant]]
diffs = ["demo2/b.diff"]
versions = ">= 0.5"
`
	secondDiff := `--- a/python/sglang/srt/layers/comm.py
+++ b/python/sglang/srt/layers/comm.py
@@ -2,2 +2,3 @@
 def gate():
+    # widened for SM120
     return _is_sm90_supported
`
	dir := t.TempDir()
	writeCatalog(t, dir, map[string]string{"demo.toml": engineTOML, "demo/a.diff": engineDiff, "demo2.toml": second, "demo2/b.diff": secondDiff})
	cat, err := loadCatalog(nil, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := cat.Get("demo")
	p2, _ := cat.Get("demo2")
	pl2 := plan(t, p2, tr)
	pl1 := plan(t, p1, tr)
	if _, err := Apply(ctx, tr, setOf(tr, pl2, pl1), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	b, _ := tr.ReadFile(commPath)
	if !strings.Contains(string(b), "# widened for SM120\n    return _is_sm90_supported or _is_sm120_supported") {
		t.Fatalf("both patches not applied:\n%s", b)
	}
	// Reverting the older one alone is refused: its file changed since
	// (the newer patch's edit).
	if _, err := Revert(ctx, tr, cat, []string{"demo2"}, RevertOptions{}); !refused(err) {
		t.Fatalf("revert of the older patch alone: %v", err)
	}
	if _, err := Revert(ctx, tr, cat, nil, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := diffSnap(orig, snapshot(t, root)); d != "" {
		t.Fatalf("not back to the original: %s", d)
	}
}

// A damaged or hostile state.json is refused; nothing outside is touched.
func TestDamagedState(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o644)
	for _, state := range []string{
		`{"format": 1, "patches": [{"name": "../../../../` + strings.TrimPrefix(outside, "/") + `", "state": "pending", "files": []}]}`,
		`{"format": 1, "patches": [{"name": "demo", "state": "pending", "files": [{"path": "../../etc/passwd"}]}]}`,
		`{"format": 1, "patches": [`,
		`{"format": 99, "patches": []}`,
	} {
		os.MkdirAll(filepath.Join(root, source.StateDirName), 0o755)
		os.WriteFile(filepath.Join(root, source.StateDirName, "state.json"), []byte(state), 0o644)
		if _, err := ReadState(ctx, tr); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("state %s: %v", state, err)
		}
		if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
			t.Fatal("a file outside the tree was removed")
		}
	}
}

// A forced revert killed between its writes is finished by the next
// command, with the forced bytes (the user's edit kept), not the originals.
func TestCrashForcedRevert(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	cat := engineCatalog(t)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(root, commPath)
	b, _ := os.ReadFile(full)
	os.WriteFile(full, append([]byte("# my edit\n"), b...), 0o644)
	journal.Hook = func(s string) error {
		if s == "revert-write:1" {
			return journal.ErrCrash
		}
		return nil
	}
	_, err := Revert(ctx, tr, cat, nil, RevertOptions{Force: true})
	journal.Hook = nil
	if !errors.Is(err, journal.ErrCrash) {
		t.Fatalf("hook: %v", err)
	}
	notes, err := recoverJournal(ctx, tr)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "finished an interrupted revert") {
		t.Fatalf("recover: %v %v", notes, err)
	}
	got, _ := os.ReadFile(full)
	if string(got) != "# my edit\n"+commOrig {
		t.Fatalf("comm.py: %q", got)
	}
	if a, _ := tr.ReadFile(argsPath); string(a) != argsOrig {
		t.Fatal("server_args.py not restored")
	}
}

// A journal entry whose files were put back by hand (git checkout) is
// stale: apply says so and writes the patch again; a file edited beside the
// patch's change keeps its entry and is reported as already applied.
func TestApplyStaleJournalEntry(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	orig := snapshot(t, root)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	patched := snapshot(t, root)
	for path, body := range map[string]string{commPath: commOrig, argsPath: argsOrig} {
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(path)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := apply(t, p, tr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Patches[0].Status != "applied" || len(res.Notices) != 1 || !strings.Contains(res.Notices[0], commPath+" (original)") {
		t.Fatalf("apply over a stale entry: %+v notices %q", res.Patches[0], res.Notices)
	}
	if d := diffSnap(patched, snapshot(t, root)); d != "" {
		t.Fatalf("not patched again: %s", d)
	}
	st, err := Status(ctx, tr, nil, journal.Options{})
	if err != nil || len(st.Patches) != 1 || !st.Patches[0].Clean {
		t.Fatalf("status after re-apply: %+v %v", st, err)
	}
	// Edited beside the change: the tree still has every change; the
	// entry (and its originals) stays.
	argsFile := filepath.Join(root, filepath.FromSlash(argsPath))
	b, _ := os.ReadFile(argsFile)
	edited := append(b, "# local edit\n"...)
	if err := os.WriteFile(argsFile, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = apply(t, p, tr)
	if err != nil || res.Patches[0].Status != "already-applied" || len(res.Notices) != 1 || !strings.Contains(res.Notices[0], "(changed)") {
		t.Fatalf("apply over an edited file: %+v %q %v", res.Patches[0], res.Notices, err)
	}
	if _, err := Revert(ctx, tr, nil, nil, RevertOptions{}); !refused(err) {
		t.Fatalf("revert of the edited file should be refused: %v", err)
	}
	if err := os.WriteFile(argsFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Revert(ctx, tr, nil, nil, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := diffSnap(orig, snapshot(t, root)); d != "" {
		t.Fatalf("revert after re-apply left differences: %s", d)
	}
}

// The second patch of one call, planned again under the lock over the
// first, keeps the reason its variant was chosen.
func TestApplyReplanKeepsVariantReason(t *testing.T) {
	ctx := context.Background()
	_, tr := engineTree(t)
	second := `name = "demo2"
project = "sglang"
[[variant]]
diffs = ["demo2/b.diff"]
versions = ">= 0.5"
`
	secondDiff := `--- a/python/sglang/srt/layers/comm.py
+++ b/python/sglang/srt/layers/comm.py
@@ -2,2 +2,3 @@
 def gate():
+    # widened for SM120
     return _is_sm90_supported
`
	dir := t.TempDir()
	writeCatalog(t, dir, map[string]string{"demo.toml": engineTOML, "demo/a.diff": engineDiff, "demo2.toml": second, "demo2/b.diff": secondDiff})
	cat, err := loadCatalog(nil, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := cat.Get("demo")
	p2, _ := cat.Get("demo2")
	pl1, pl2 := plan(t, p1, tr), plan(t, p2, tr)
	want := pl1.VariantReason
	if want == "" || strings.Contains(want, "explicitly") {
		t.Fatalf("fixture: first plan's reason %q", want)
	}
	res, err := Apply(ctx, tr, setOf(tr, pl2, pl1), ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Patches[1].VariantReason; got != want {
		t.Fatalf("second patch's variant reason %q, want %q", got, want)
	}
	st, err := Status(ctx, tr, nil, journal.Options{})
	if err != nil || st.Patches[1].VariantReason != want {
		t.Fatalf("journal's variant reason: %+v %v", st.Patches[1], err)
	}
}

// A patch that creates a file under new directories: revert (and a
// rollback) removes the file and the directories apply made, and leaves a
// directory that holds something else.
func TestRevertRemovesCreatedDirs(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	orig := snapshot(t, root)
	toml := `name = "mkdir"
project = "sglang"
[[variant]]
diffs = ["mkdir/a.diff"]
`
	diff := `--- /dev/null
+++ b/python/sglang/srt/newdir/sub/fused.py
@@ -0,0 +1,1 @@
+FUSED = True
`
	dir := t.TempDir()
	writeCatalog(t, dir, map[string]string{"mkdir.toml": toml, "mkdir/a.diff": diff})
	cat, err := loadCatalog(nil, []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cat.Get("mkdir")
	newdir := filepath.Join(root, "python/sglang/srt/newdir")
	for round := 0; round < 2; round++ {
		if _, err := apply(t, p, tr); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(newdir, "sub/fused.py")); err != nil {
			t.Fatal(err)
		}
		keep := filepath.Join(newdir, "mine.txt")
		if round == 1 {
			// Something of the user's in a directory apply made keeps it.
			if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Revert(ctx, tr, cat, nil, RevertOptions{}); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			if _, err := os.Stat(newdir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("directories made by apply left after revert: %v", err)
			}
			if d := diffSnap(orig, snapshot(t, root)); d != "" {
				t.Fatalf("revert left differences: %s", d)
			}
			continue
		}
		if _, err := os.Stat(filepath.Join(newdir, "sub")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("empty directory made by apply left: %v", err)
		}
		if _, err := os.Stat(keep); err != nil {
			t.Fatalf("a directory holding the user's file was removed: %v", err)
		}
	}
	// A rollback (a verify rule fails after writing) removes them too.
	if err := os.RemoveAll(newdir); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(toml, "[[variant]]", "[[verify]]\nfile = \"python/sglang/srt/newdir/sub/fused.py\"\ncontains = \"NOPE\"\n[[variant]]", 1)
	writeCatalog(t, dir, map[string]string{"mkdir.toml": bad, "mkdir/a.diff": diff})
	if cat, err = loadCatalog(nil, []string{dir}); err != nil {
		t.Fatal(err)
	}
	p, _ = cat.Get("mkdir")
	if _, err := apply(t, p, tr); err == nil {
		t.Fatal("verify failure not reported")
	}
	if _, err := os.Stat(newdir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("directories made by a rolled-back apply left: %v", err)
	}
}

// A refused revert writes nothing, and its result says so for every file.
func TestRevertRefusedStates(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	argsFile := filepath.Join(root, filepath.FromSlash(argsPath))
	b, _ := os.ReadFile(argsFile)
	if err := os.WriteFile(argsFile, append(b, "# edit\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Revert(ctx, tr, nil, nil, RevertOptions{})
	if !refused(err) {
		t.Fatalf("revert: %v", err)
	}
	got := map[string]string{}
	for _, f := range res.Patches[0].Files {
		got[f.Path] = f.State
	}
	want := map[string]string{commPath: "not-written", argsPath: "changed"}
	if fmt.Sprint(got) != fmt.Sprint(want) || res.Patches[0].Status != "refused" {
		t.Fatalf("refused revert says %v (%s), want %v", got, res.Patches[0].Status, want)
	}
}

// Only one file of two put back by hand: the replacing entry keeps the
// other file's record and original, so revert restores both.
func TestApplyStaleEntryPartly(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	p := enginePatch(t)
	orig := snapshot(t, root)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	patched := snapshot(t, root)
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(commPath)), []byte(commOrig), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := apply(t, p, tr)
	if err != nil || res.Patches[0].Status != "applied" || len(res.Notices) != 1 {
		t.Fatalf("apply over a partly stale entry: %+v %q %v", res.Patches[0], res.Notices, err)
	}
	if d := diffSnap(patched, snapshot(t, root)); d != "" {
		t.Fatalf("not patched again: %s", d)
	}
	st, err := Status(ctx, tr, nil, journal.Options{})
	if err != nil || len(st.Patches) != 1 || len(st.Patches[0].Files) != 2 || !st.Patches[0].Clean {
		t.Fatalf("status: %+v %v", st.Patches, err)
	}
	if _, err := Revert(ctx, tr, nil, nil, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := diffSnap(orig, snapshot(t, root)); d != "" {
		t.Fatalf("revert left differences: %s", d)
	}
}

// setOf is a set of plans each made on the tree as it is.
func setOf(t source.Tree, plans ...*Plan) *Set { return &Set{Tree: t, Plans: plans} }

// recoverJournal finishes what a killed command left in t's journal, as a
// writing command does first, and returns its lines.
func recoverJournal(ctx context.Context, t source.WritableTree) ([]string, error) {
	j, err := journal.Open(ctx, t, journal.Options{})
	if err != nil {
		return nil, err
	}
	defer j.Close()
	return j.Recover()
}

// refused reports whether err is a revert refused with nothing written.
func refused(err error) bool {
	var re *RevertRefusedError
	return errors.As(err, &re)
}

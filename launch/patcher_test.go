package launch

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smpatch/smpatch/internal/testkit/synth"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
)

// sglangTree writes a synthetic sglang checkout of an upstream shape
// (internal/synth: c4-s3 is sglang ~0.5.8-0.5.14, c2 is late 2025) and
// returns its directory.
func sglangTree(t *testing.T, shape string) string {
	t.Helper()
	dir := t.TempDir()
	files := synth.SGLangTree(shape, false)
	if files == nil {
		t.Fatalf("no shape %s", shape)
	}
	for rel, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// snapshot is every file and directory under dir with its bytes and mode.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[rel] = "dir " + info.Mode().String()
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = info.Mode().String() + " " + string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertSameTree(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed or missing after the run", k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s left behind by the run", k)
		}
	}
}

func treePatcher(t *testing.T, dir string) *TreePatcher {
	t.Helper()
	cat, err := catalog.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &TreePatcher{Catalog: cat, ToolVersion: "test", Open: func(ctx context.Context, p source.Project) (source.WritableTree, error) {
		return source.OpenCheckout(dir)
	}}
}

const fusionMarker = "_is_sm120_supported"

// The story's fusion experiment: the patched cell's server crashes with the
// flashinfer arch line and is triaged; the unpatched cells run; the tree ends
// as it began.
func TestRunPatchedCells(t *testing.T) {
	repo := sglangTree(t, "c4-s3")
	before := snapshot(t, repo)
	pids := t.TempDir()
	o := testOptions(t)
	o.Patcher = treePatcher(t, repo)
	o.Baseline = "base"
	base := fakeCell(t, "base", "story", pids, "-repo", repo, "--cuda-graph-max-bs", "512")
	fast := fakeCell(t, "cgbs128", "story", pids, "-repo", repo, "--cuda-graph-max-bs", "128")
	fusion := fakeCell(t, "fusion", "story", pids, "-repo", repo, "--cuda-graph-max-bs", "128")
	fusion.Patches = []string{"sm120-fusion"}
	s, err := Run(context.Background(), []*Cell{base, fusion, fast}, o)
	if err != nil {
		t.Fatal(err)
	}
	assertNoOrphans(t, pids)
	assertSameTree(t, before, snapshot(t, repo))
	got := map[string]*Result{}
	for _, r := range s.Results {
		got[r.ID] = r
	}
	if r := got["fusion"]; r.Status != StatusFailed || r.Triage == nil || r.Triage.Label != "flashinfer-no-arch" {
		t.Errorf("fusion: %s %q %+v", r.Status, r.Reason, r.Triage)
	}
	if r := got["cgbs128"]; r.Status != StatusOK || r.Metrics["throughput"] != 89.5 || r.DeltaPct["throughput"] != 9.1 {
		t.Errorf("cgbs128: %s %q %v %v", r.Status, r.Reason, r.Metrics, r.DeltaPct)
	}
	if r := got["base"]; r.Status != StatusOK || r.Metrics["throughput"] != 82 {
		t.Errorf("base: %s %q %v", r.Status, r.Reason, r.Metrics)
	}
}

// A cell whose patches do not apply fails with the reason, and nothing in
// the tree changes.
func TestRunPatchDoesNotApply(t *testing.T) {
	repo := sglangTree(t, "c2") // a shape sm120-fusion does not cover
	before := snapshot(t, repo)
	o := testOptions(t)
	o.Patcher = treePatcher(t, repo)
	c := &Cell{ID: "fusion", Patches: []string{"sm120-fusion"}, Command: []string{"true"}}
	s, err := Run(context.Background(), []*Cell{c}, o)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Results[0]
	if r.Status != StatusFailed || !strings.HasPrefix(r.Reason, "patch: sm120-fusion does not apply") || r.Triage.Label != "patch-not-applied" {
		t.Errorf("got %s %q %+v", r.Status, r.Reason, r.Triage)
	}
	assertSameTree(t, before, snapshot(t, repo))
	// The cell never started: no log to point at, and no log line in the
	// tables (the label names none).
	if r.Log != "" {
		t.Errorf("log %q for a cell that never started", r.Log)
	}
	var text, md, csv, junit bytes.Buffer
	s.WriteText(&text)
	s.WriteMarkdown(&md)
	if err := s.WriteCSV(&csv); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteJUnit(&junit); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]*bytes.Buffer{"text": &text, "markdown": &md, "csv": &csv, "junit": &junit} {
		if strings.Contains(b.String(), "line 0") {
			t.Errorf("%s names line 0:\n%s", name, b)
		}
	}
	if !strings.Contains(text.String(), "patch-not-applied (patch: sm120-fusion does not apply") {
		t.Errorf("the text table does not say why:\n%s", &text)
	}
}

// A patch the tree already had before the run stays applied afterwards.
func TestRunKeepsPatchAppliedBefore(t *testing.T) {
	repo := sglangTree(t, "c4-s3")
	tp := treePatcher(t, repo)
	ctx := context.Background()
	if err := tp.Apply(ctx, "by hand", []string{"sm120-fusion"}); err != nil {
		t.Fatal(err)
	}
	tp.applied = nil // as if applied by another command
	before := snapshot(t, repo)
	o := testOptions(t)
	o.Patcher = treePatcher(t, repo)
	c := &Cell{ID: "fusion", Patches: []string{"sm120-fusion"}, Command: []string{"sh", "-c", "echo 'Output token throughput (tok/s): 1'"}}
	s, err := Run(ctx, []*Cell{c}, o)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Results[0]; r.Status != StatusOK {
		t.Errorf("got %s %q", r.Status, r.Reason)
	}
	after := snapshot(t, repo)
	if !strings.Contains(after[filepath.FromSlash("python/sglang/srt/layers/communicator.py")], fusionMarker) {
		t.Error("the patch applied before the run was reverted")
	}
	// The journal's timestamps may change on recovery; the sources may not.
	for k, v := range before {
		if !strings.HasPrefix(k, ".smpatch") && after[k] != v {
			t.Errorf("%s changed", k)
		}
	}
}

// An interrupt while a patched cell's server is starting stops the server
// and its workers, reverts the patch and records nothing for the cell, so
// that --resume runs it again.
func TestRunInterruptRestoresTree(t *testing.T) {
	repo := sglangTree(t, "c4-s3")
	before := snapshot(t, repo)
	pids := t.TempDir()
	o := testOptions(t)
	o.StartupTimeout = time.Minute
	o.Patcher = treePatcher(t, repo)
	done := fakeCell(t, "done", "ok", pids)
	hang := fakeCell(t, "hang", "ignore-term", pids, "-delay", "1h")
	hang.Patches = []string{"sm120-fusion"}
	later := fakeCell(t, "later", "ok", pids)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sawPatched := make(chan bool, 1)
	go func() {
		// Interrupt once the hanging cell's worker is up, after checking
		// that the tree is patched while the server runs.
		for ctx.Err() == nil {
			if data, err := os.ReadFile(filepath.Join(pids, "hang.child.pid")); err == nil && len(data) > 0 {
				comm, _ := os.ReadFile(filepath.Join(repo, "python/sglang/srt/layers/communicator.py"))
				sawPatched <- bytes.Contains(comm, []byte(fusionMarker))
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	s, err := Run(ctx, []*Cell{done, hang, later}, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if !<-sawPatched {
		t.Error("the tree was not patched while the cell ran")
	}
	assertNoOrphans(t, pids)
	assertSameTree(t, before, snapshot(t, repo))
	if !s.Interrupted {
		t.Error("summary not marked interrupted")
	}
	want := map[string]Status{"done": StatusOK, "hang": StatusSkipped, "later": StatusSkipped}
	for _, r := range s.Results {
		if r.Status != want[r.ID] {
			t.Errorf("%s: %s %q, want %s", r.ID, r.Status, r.Reason, want[r.ID])
		}
	}
	prev, err := readJSONL(nil, filepath.Join(o.Out, ResultsJSONL))
	if err != nil {
		t.Fatal(err)
	}
	if len(prev) != 1 || prev["done"] == nil {
		t.Errorf("results.jsonl holds %v, want only the finished cell", prev)
	}
	if _, err := os.Stat(filepath.Join(o.Out, ResultsMD)); err != nil {
		t.Error("no results table after the interrupt:", err)
	}
}

// After an interrupt no further cell starts, also one waiting in the same
// patch group for the cell that was interrupted to finish.
func TestRunInterruptStartsNoMoreCells(t *testing.T) {
	pids := t.TempDir()
	o := testOptions(t)
	o.StartupTimeout = time.Minute
	hang := fakeCell(t, "hang", "hang", pids)
	later := fakeCell(t, "later", "ok", pids)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if data, err := os.ReadFile(filepath.Join(pids, "hang.pid")); err == nil && len(data) > 0 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	s, err := Run(ctx, []*Cell{hang, later}, o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	assertNoOrphans(t, pids)
	if _, err := os.Stat(filepath.Join(pids, "later.pid")); err == nil {
		t.Error("a cell started after the interrupt")
	}
	if _, err := os.Stat(filepath.Join(o.Out, LogsDir, "later.log")); err == nil {
		t.Error("a cell after the interrupt has a log")
	}
	for _, r := range s.Results {
		if r.Status != StatusSkipped {
			t.Errorf("%s: %s %q, want skipped", r.ID, r.Status, r.Reason)
		}
	}
}

// A matrix run killed while a patched cell ran leaves that patch applied.
// The next run must not take it for a patch applied by hand and run the
// cells without it on the patched tree: it refuses before anything starts
// and says how to revert; nothing changes.
func TestCheckRefusesPatchLeftByEarlierRun(t *testing.T) {
	repo := sglangTree(t, "c4-s3")
	ctx := context.Background()
	killed := treePatcher(t, repo)
	if err := killed.Apply(ctx, "fusion", []string{"sm120-fusion"}); err != nil {
		t.Fatal(err)
	}
	// The run was killed here: no revert.
	before := snapshot(t, repo)
	err := treePatcher(t, repo).Check(ctx, []string{"sm120-fusion"})
	if err == nil || !strings.Contains(err.Error(), "sm120-fusion is still applied by an earlier matrix run that did not finish") ||
		!strings.Contains(err.Error(), "smpatch revert sm120-fusion --repo ") {
		t.Fatalf("got %v", err)
	}
	assertSameTree(t, before, snapshot(t, repo))

	// Applied by hand (smpatch apply, no matrix run note): left as found.
	hand := sglangTree(t, "c4-s3")
	tp := treePatcher(t, hand)
	tr, err := tp.tree(ctx, "sglang")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := tp.Catalog.Get("sm120-fusion")
	set, err := patches.PlanSet(ctx, tr, []*patches.Patch{p}, patches.SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := patches.Apply(ctx, tr, set, patches.ApplyOptions{ToolVersion: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := treePatcher(t, hand).Check(ctx, []string{"sm120-fusion"}); err != nil {
		t.Errorf("a patch applied by hand: %v", err)
	}
}

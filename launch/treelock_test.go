package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
)

// A run waits for a tree another run patches, saying who holds it, and
// goes on once that run is done; a signal ends the wait at once. Runs that
// only run from a tree share it.
func TestTreeHeldForTheRun(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	tree := t.TempDir()
	var a treeHold
	if err := a.holdTree(context.Background(), tree, true, "/results/a", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var said []string
	progress := func(f string, args ...any) {
		mu.Lock()
		said = append(said, fmt.Sprintf(f, args...))
		mu.Unlock()
	}
	got := make(chan error, 1)
	var b treeHold
	go func() { got <- b.holdTree(context.Background(), tree, false, "/results/b", progress) }()
	select {
	case err := <-got:
		t.Fatalf("the second run did not wait for the first: %v", err)
	case <-time.After(800 * time.Millisecond):
	}
	mu.Lock()
	want := fmt.Sprintf("waiting for %s: another smpatch matrix run (pid %d, results /results/a) uses it", tree, os.Getpid())
	if len(said) != 1 || said[0] != want {
		t.Errorf("said %q, want %q", said, want)
	}
	mu.Unlock()
	a.release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second run never took the tree")
	}
	// Shared with a third run that only runs from it.
	var c treeHold
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.holdTree(ctx, tree, false, "/results/c", progress); err != nil {
		t.Fatalf("two runs from one tree: %v", err)
	}
	// A run that patches waits for both; a signal stops the wait.
	ctx, stop := context.WithCancel(context.Background())
	go func() { time.Sleep(300 * time.Millisecond); stop() }()
	var d treeHold
	start := time.Now()
	err := d.holdTree(ctx, tree, true, "/results/d", progress)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "nothing was changed") || time.Since(start) > 2*time.Second {
		t.Errorf("a stopped wait: %v after %s", err, time.Since(start))
	}
	b.release()
	c.release()
}

// A run of unpatched cells on a tree patched by hand warns, and every cell
// carries the warning: it ran with the patch.
func TestUnpatchedRunWarnsOfPatchedTree(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	repo := sglangTree(t, "c4-s3")
	applyByHand(t, repo, "sm120-fusion")
	p := filepath.Join(t.TempDir(), "m.toml")
	src := "name = \"plain\"\nproject = \"sglang\"\n[axes]\nn = [1, 2]\n[launch]\ncommand = [\"sh\", \"-c\", \"echo 'Output token throughput (tok/s): 1'\"]\n"
	os.WriteFile(p, []byte(src), 0o644)
	var warned []string
	res, err := RunMatrix(context.Background(), MatrixRun{File: p, Runner: RunnerLocal, Repo: repo,
		Options: Options{Out: filepath.Join(t.TempDir(), "out"), Warn: func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }}})
	if err != nil {
		t.Fatal(err)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "already has sm120-fusion applied (not by this run); 2 cell(s)") {
		t.Errorf("warnings: %q", warned)
	}
	for _, r := range res.Summary.Results {
		if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "sm120-fusion applied (not by this run): this cell ran with it") {
			t.Errorf("%s: warnings %q", r.ID, r.Warnings)
		}
	}
}

// applyByHand applies a catalog patch as smpatch apply does, without a
// matrix run's note.
func applyByHand(t *testing.T, repo, name string) {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := cat.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := source.OpenCheckout(repo)
	if err != nil {
		t.Fatal(err)
	}
	set, err := patches.PlanSet(ctx, tree, []*patches.Patch{p}, patches.SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := patches.Apply(ctx, tree, set, patches.ApplyOptions{ToolVersion: "test"}); err != nil {
		t.Fatal(err)
	}
}

// A matrix run on a tree another run patches waits before any cell starts
// (its cells would run on the other run's patches, recorded as unpatched),
// and a signal stops it with nothing written.
func TestSecondRunWaitsForTree(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	repo := sglangTree(t, "c4-s3")
	var a treeHold
	if err := a.holdTree(context.Background(), repo, true, "/results/a", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	defer a.release()
	p := filepath.Join(t.TempDir(), "m.toml")
	os.WriteFile(p, []byte("name = \"plain\"\nproject = \"sglang\"\n[axes]\nn = [1]\n[launch]\ncommand = [\"true\"]\n"), 0o644)
	out := filepath.Join(t.TempDir(), "out")
	var mu sync.Mutex
	var said []string
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := RunMatrix(ctx, MatrixRun{File: p, Runner: RunnerLocal, Repo: repo, Options: Options{Out: out,
		Progress: func(f string, a ...any) { mu.Lock(); said = append(said, fmt.Sprintf(f, a...)); mu.Unlock() }}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(said) == 0 || !strings.HasPrefix(said[0], "waiting for "+repo+": another smpatch matrix run (pid ") {
		t.Errorf("said %q", said)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the waiting run wrote %s", out)
	}
}

// Without a state directory to lock in (a read-only home), a run of
// unpatched cells goes on, warning that runs on the tree are not kept
// apart.
func TestTreeLockUnavailableWarns(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	os.WriteFile(file, nil, 0o644)
	t.Setenv("XDG_STATE_HOME", file)
	repo := sglangTree(t, "c4-s3")
	p := filepath.Join(t.TempDir(), "m.toml")
	os.WriteFile(p, []byte("name = \"plain\"\nproject = \"sglang\"\n[axes]\nn = [1]\n[launch]\ncommand = [\"sh\", \"-c\", \"echo 'Output token throughput (tok/s): 1'\"]\n"), 0o644)
	var warned []string
	res, err := RunMatrix(context.Background(), MatrixRun{File: p, Runner: RunnerLocal, Repo: repo,
		Options: Options{Out: filepath.Join(t.TempDir(), "out"), Warn: func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) }}})
	if err != nil || res.Summary.OK != 1 {
		t.Fatalf("%v", err)
	}
	if len(warned) != 1 || !strings.HasSuffix(warned[0], "runs on this tree are not kept apart") {
		t.Errorf("warnings %q", warned)
	}
}

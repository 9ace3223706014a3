package patches

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/smpatch/smpatch/source"
)

// TestJournalConcurrentChild is a process of TestJournalConcurrent: it
// applies or reverts the fixture patch, rounds times, and exits non-zero
// on the first error.
func TestJournalConcurrentChild(t *testing.T) {
	root, catDir := os.Getenv("SMPATCH_CONC_TREE"), os.Getenv("SMPATCH_CONC_CATALOG")
	if root == "" {
		t.Skip("run by TestJournalConcurrent")
	}
	ctx := context.Background()
	cat, err := loadCatalog(nil, []string{catDir})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cat.Get("demo")
	rounds, _ := strconv.Atoi(os.Getenv("SMPATCH_CONC_ROUNDS"))
	for i := 0; i < rounds; i++ {
		tr, err := source.OpenCheckout(root)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			pl, err := NewPlan(ctx, p, tr, PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if pl.Outcome() == OutcomeApplies || pl.Outcome() == OutcomeAlreadyApplied {
				if _, err := Apply(ctx, tr, &Set{Tree: tr, Plans: []*Plan{pl}}, ApplyOptions{}); err != nil {
					t.Fatalf("apply: %v", err)
				}
			}
		} else if _, err := Revert(ctx, tr, cat, nil, RevertOptions{}); err != nil {
			t.Fatalf("revert: %v", err)
		}
	}
}

// Many processes apply and revert on one tree at once: none fails (a
// revert that removes the journal never pulls the lock from under a
// waiting process), and the tree ends original or patched, as the journal
// says.
func TestJournalConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	root, tr := engineTree(t)
	catDir := t.TempDir()
	writeCatalog(t, catDir, map[string]string{"demo.toml": engineTOML, "demo/a.diff": engineDiff})
	orig := snapshot(t, root)
	const procs, rounds = 16, 6
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		c := exec.Command(os.Args[0], "-test.run=^TestJournalConcurrentChild$", "-test.count=1")
		c.Env = append(os.Environ(), "SMPATCH_CONC_TREE="+root, "SMPATCH_CONC_CATALOG="+catDir, "SMPATCH_CONC_ROUNDS="+strconv.Itoa(rounds), "GORACE=atexit_sleep_ms=0")
		outs[i] = &bytes.Buffer{}
		c.Stdout, c.Stderr = outs[i], outs[i]
		cmds[i] = c
	}
	t0 := time.Now()
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	failed := 0
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			failed++
			t.Errorf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	t.Logf("%d processes x %d rounds in %v", procs, rounds, time.Since(t0))
	if failed > 0 {
		return
	}
	st, err := ReadState(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Patches) == 0 && !sameSnap(orig, snapshot(t, root)) {
		t.Fatalf("journal empty but tree not original: %s", diffSnap(orig, snapshot(t, root)))
	}
	if len(st.Patches) == 1 {
		if _, err := Revert(context.Background(), tr, nil, nil, RevertOptions{}); err != nil {
			t.Fatal(err)
		}
		if !sameSnap(orig, snapshot(t, root)) {
			t.Fatal("revert after the storm did not restore the original")
		}
	}
	if _, err := os.Lstat(filepath.Join(root, source.StateDirName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("journal left after the last revert: %v", err)
	}
}

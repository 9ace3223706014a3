package patches

import (
	"github.com/smpatch/smpatch/patches/journal"

	"github.com/smpatch/smpatch/patches/catalog"

	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/smpatch/smpatch/source"
)

// pairPatches are two patches of the engine fixture that write different
// files: "gate" the communicator, "auto" server_args.py.
func pairPatches(t *testing.T) []*Patch {
	t.Helper()
	auto := strings.TrimPrefix(engineDiff, commDiff)
	fsys := fstest.MapFS{
		"gate.toml": {Data: []byte("name = \"gate\"\nproject = \"sglang\"\n[[variant]]\nversions = \"\"\ndiffs = [\"gate.diff\"]\n")},
		"gate.diff": {Data: []byte(commDiff)},
		"auto.toml": {Data: []byte("name = \"auto\"\nproject = \"sglang\"\nneeds = [\"gate\"]\n[[variant]]\nversions = \"\"\ndiffs = [\"auto.diff\"]\n")},
		"auto.diff": {Data: []byte(auto)},
	}
	ps, err := catalog.LoadFS(fsys, "cat", "test")
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Name != "auto" {
		ps[0], ps[1] = ps[1], ps[0]
	}
	return []*Patch{ps[1], ps[0]} // gate, auto
}

// The patches of one apply that write different files are one journal
// transaction: one pending state with both entries, one applied state;
// each entry still has its own copies, and reverts on its own.
func TestSetIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	ps := pairPatches(t)
	orig := snapshot(t, root)
	var steps []string
	journal.Hook = func(s string) error { steps = append(steps, s); return nil }
	s, err := PlanSet(ctx, tr, ps, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Apply(ctx, tr, s, ApplyOptions{ToolVersion: "test"})
	journal.Hook = nil
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(steps, " "); got != "before-pending write:0 write:1 after-writes" {
		t.Fatalf("steps: %s", got)
	}
	if len(res.Patches) != 2 || res.Patches[0].Name != "gate" || res.Patches[1].Name != "auto" || res.Patches[0].Status != "applied" || res.Patches[1].Status != "applied" {
		t.Fatalf("result: %+v %+v", res.Patches[0], res.Patches[1])
	}
	for _, n := range []string{"gate", "auto"} {
		if _, err := os.Stat(filepath.Join(root, source.StateDirName, n+".orig.tar")); err != nil {
			t.Fatalf("copies of %s: %v", n, err)
		}
	}
	st, err := ReadState(ctx, tr)
	if err != nil || len(st.Patches) != 2 || st.Patches[0].Name != "gate" || st.Patches[1].State != journal.Applied {
		t.Fatalf("state: %+v %v", st, err)
	}
	if _, err := Revert(ctx, tr, nil, []string{"auto"}, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, argsPath)); string(b) != argsOrig {
		t.Fatalf("auto not reverted: %q", b)
	}
	if _, err := Revert(ctx, tr, nil, nil, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if !sameSnap(orig, snapshot(t, root)) {
		t.Fatal("revert did not restore the original")
	}
}

// A set's transaction killed at any step is rolled back whole by the next
// command, newest entry first; an error (not a crash) rolls it back at once.
func TestSetTransactionCrash(t *testing.T) {
	ctx := context.Background()
	for _, step := range []string{"before-pending", "write:0", "write:1", "after-writes"} {
		for _, crash := range []bool{true, false} {
			root, tr := engineTree(t)
			ps := pairPatches(t)
			orig := snapshot(t, root)
			s, err := PlanSet(ctx, tr, ps, SetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			fail := errors.New("disk full")
			if crash {
				fail = journal.ErrCrash
			}
			journal.Hook = func(s string) error {
				if s == step {
					return fail
				}
				return nil
			}
			_, err = Apply(ctx, tr, s, ApplyOptions{ToolVersion: "test"})
			journal.Hook = nil
			if !errors.Is(err, fail) {
				t.Fatalf("%s: hook did not fire: %v", step, err)
			}
			notes, err := recoverJournal(ctx, tr)
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			if !sameSnap(orig, snapshot(t, root)) {
				t.Fatalf("%s (crash %v): not original after recovery: %s", step, crash, diffSnap(orig, snapshot(t, root)))
			}
			want := 0
			if crash && step != "before-pending" {
				want = 2
			}
			if len(notes) != want || (want == 2 && (!strings.Contains(notes[0], "of auto") || !strings.Contains(notes[1], "of gate"))) {
				t.Fatalf("%s (crash %v): notes %q", step, crash, notes)
			}
			st, _ := ReadState(ctx, tr)
			if len(st.Patches) != 0 {
				t.Fatalf("%s: journal still lists %s", step, st.Patches[0].Name)
			}
		}
	}
}

// Two patches that write one file are two transactions, the second on the
// first's result; killed in the second, the next command rolls back only
// the second.
func TestSetSameFileTwoTransactions(t *testing.T) {
	ctx := context.Background()
	root, tr, ps := setFixture(t)
	var steps []string
	journal.Hook = func(s string) error {
		steps = append(steps, s)
		if len(steps) == 5 { // the second transaction's write:0
			return journal.ErrCrash
		}
		return nil
	}
	s, err := PlanSet(ctx, tr, ps, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Apply(ctx, tr, s, ApplyOptions{ToolVersion: "test"})
	journal.Hook = nil
	if !errors.Is(err, journal.ErrCrash) || strings.Join(steps, " ") != "before-pending write:0 after-writes before-pending write:0" {
		t.Fatalf("steps %q: %v", steps, err)
	}
	notes, err := recoverJournal(ctx, tr)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "of two") {
		t.Fatalf("recover: %q %v", notes, err)
	}
	b, _ := os.ReadFile(filepath.Join(root, setFile))
	if string(b) != "alpha = 1\nbeta = 2\ninserted = 0\ngamma = 3\ndelta = 4\n" {
		t.Fatalf("after recovery: %q", b)
	}
}

// A revert of the patches of a set is one transaction too: killed between
// its writes, the next command finishes it for both, newest first.
func TestRevertSetTransactionCrash(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	ps := pairPatches(t)
	orig := snapshot(t, root)
	s, err := PlanSet(ctx, tr, ps, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, tr, s, ApplyOptions{ToolVersion: "test"}); err != nil {
		t.Fatal(err)
	}
	var steps []string
	journal.Hook = func(s string) error {
		steps = append(steps, s)
		if s == "revert-write:1" {
			return journal.ErrCrash
		}
		return nil
	}
	_, err = Revert(ctx, tr, nil, nil, RevertOptions{})
	journal.Hook = nil
	if !errors.Is(err, journal.ErrCrash) || strings.Join(steps, " ") != "revert-write:0 revert-write:1" {
		t.Fatalf("steps %q: %v", steps, err)
	}
	notes, err := recoverJournal(ctx, tr)
	if err != nil || len(notes) != 2 || !strings.Contains(notes[0], "revert of auto") || !strings.Contains(notes[1], "revert of gate") {
		t.Fatalf("recover: %q %v", notes, err)
	}
	if !sameSnap(orig, snapshot(t, root)) {
		t.Fatal("not original after recovery")
	}
}

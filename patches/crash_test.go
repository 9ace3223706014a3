package patches

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// crashRounds is $SMPATCH_CRASH_ROUNDS, else def.
func crashRounds(def int) int {
	if n, err := strconv.Atoi(os.Getenv("SMPATCH_CRASH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return def
}

// padTree makes the two target files large (synthetic Python after the
// patched region) so that a kill lands inside writes often.
func padTree(t testing.TB, root string) {
	t.Helper()
	for _, rel := range []string{commPath, argsPath} {
		p := filepath.Join(root, filepath.FromSlash(rel))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		sb.Write(b)
		for i := 0; sb.Len() < 200_000; i++ {
			fmt.Fprintf(&sb, "\n\ndef helper_%d(x):\n    return x + %d\n", i, i)
		}
		if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCrashChild is the subprocess of TestCrashSIGKILL: it applies and
// reverts the fixture patch in a loop until it is killed.
func TestCrashChild(t *testing.T) {
	root, catDir := os.Getenv("SMPATCH_CRASH_CHILD_TREE"), os.Getenv("SMPATCH_CRASH_CHILD_CATALOG")
	if root == "" {
		t.Skip("run by TestCrashSIGKILL")
	}
	ctx := context.Background()
	cat, err := loadCatalog(nil, []string{catDir})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cat.Get("demo")
	tr, err := source.OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("started")
	for i := 0; i < 1000; i++ {
		st, err := ReadState(ctx, tr)
		if err != nil {
			t.Fatal(err)
		}
		if st.Get("demo") != nil {
			if _, err := Revert(ctx, tr, cat, nil, RevertOptions{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		pl, err := NewPlan(ctx, p, tr, PlanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Apply(ctx, tr, setOf(tr, pl), ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCrashSIGKILL kills a real process that applies and reverts in a loop,
// at random moments, and checks after each kill that the next command
// leaves the tree byte-identical to the original or to the fully patched
// state, in agreement with the journal.
func TestCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ctx := context.Background()
	rounds := crashRounds(20)
	root, tr := engineTree(t)
	padTree(t, root)
	catDir := t.TempDir()
	writeCatalog(t, catDir, map[string]string{"demo.toml": engineTOML, "demo/a.diff": engineDiff})
	cat, err := loadCatalog(nil, []string{catDir})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cat.Get("demo")
	orig := snapshot(t, root)
	t0 := time.Now()
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	patched := snapshot(t, root)
	if _, err := Revert(ctx, tr, cat, nil, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	// Kill within about two apply+revert cycles of the child's start.
	window := 4 * time.Since(t0)
	if !sameSnap(orig, snapshot(t, root)) {
		t.Fatal("revert did not restore the original")
	}
	seen := map[string]int{}
	for r := 0; r < rounds; r++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SMPATCH_CRASH_CHILD_TREE="+root, "SMPATCH_CRASH_CHILD_CATALOG="+catDir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(out)
			ok := false
			for sc.Scan() {
				if sc.Text() == "started" && !ok {
					ok = true
					started <- true
				}
			}
			if !ok {
				started <- false
			}
		}()
		if !<-started {
			_ = cmd.Wait()
			t.Fatalf("round %d: the child did not start", r)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(window))))
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		// status reports what the kill left in flight, and writes nothing.
		before := journalSnapshot(t, root)
		res, err := Status(ctx, tr, nil, journal.Options{})
		if err != nil {
			t.Fatalf("round %d: status: %v", r, err)
		}
		if after := journalSnapshot(t, root); !sameSnap(before, after) {
			t.Fatalf("round %d: status wrote: %s", r, diffSnap(before, after))
		}
		inFlight := 0
		if j, err := journal.Read(ctx, tr, journal.Options{}); err == nil {
			for _, e := range j.State().Patches {
				if e.State != journal.Applied {
					inFlight++
				}
			}
			j.Close()
		}
		if len(res.Interrupted) != inFlight {
			t.Fatalf("round %d: status reports %d interrupted, the journal has %d in flight", r, len(res.Interrupted), inFlight)
		}
		if inFlight > 0 {
			seen["interrupted "+res.Interrupted[0].Operation]++
		}
		// The next writing command recovers it.
		st, err := ReadState(ctx, tr)
		if err != nil {
			t.Fatalf("round %d: recovery: %v", r, err)
		}
		now := snapshot(t, root)
		applied := st.Get("demo") != nil
		switch {
		case sameSnap(now, orig) && !applied:
			seen["original"]++
		case sameSnap(now, patched) && applied:
			seen["patched"]++
		default:
			t.Fatalf("round %d: tree is neither original nor patched as the journal says (applied=%v): differs from original in %s; from patched in %s",
				r, applied, diffSnap(orig, now), diffSnap(patched, now))
		}
	}
	t.Logf("%d rounds, kills within %v of the start: %v", rounds, window, seen)
}

// TestCrashConcurrentChild is one of the two processes of
// TestCrashConcurrentProcesses: it applies the fixture patch once and prints
// what Apply reported.
func TestCrashConcurrentChild(t *testing.T) {
	root, catDir := os.Getenv("SMPATCH_CONC_CHILD_TREE"), os.Getenv("SMPATCH_CONC_CHILD_CATALOG")
	if root == "" {
		t.Skip("run by TestCrashConcurrentProcesses")
	}
	ctx := context.Background()
	cat, err := loadCatalog(nil, []string{catDir})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := cat.Get("demo")
	tr, err := source.OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := NewPlan(ctx, p, tr, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Apply(ctx, tr, setOf(tr, pl), ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("status=" + res.Patches[0].Status)
}

// TestCrashConcurrentProcesses runs two processes that apply the same patch
// to one tree at the same time: one writes, the other waits for the lock and
// finds the patch applied; the files are patched exactly once.
func TestCrashConcurrentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for round := 0; round < 3; round++ {
		root, _ := engineTree(t)
		padTree(t, root)
		catDir := t.TempDir()
		writeCatalog(t, catDir, map[string]string{"demo.toml": engineTOML, "demo/a.diff": engineDiff})
		var cmds []*exec.Cmd
		var outs []*strings.Builder
		for i := 0; i < 2; i++ {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashConcurrentChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "SMPATCH_CONC_CHILD_TREE="+root, "SMPATCH_CONC_CHILD_CATALOG="+catDir)
			var b strings.Builder
			cmd.Stdout, cmd.Stderr = &b, &b
			cmds, outs = append(cmds, cmd), append(outs, &b)
		}
		for _, c := range cmds {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]int{}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("process %d: %v\n%s", i, err, outs[i])
			}
			for _, l := range strings.Split(outs[i].String(), "\n") {
				if s, ok := strings.CutPrefix(l, "status="); ok {
					got[s]++
				}
			}
		}
		if got["applied"] != 1 || got["already-applied"] != 1 {
			t.Fatalf("round %d: statuses %v\n%s\n%s", round, got, outs[0], outs[1])
		}
		b, _ := os.ReadFile(filepath.Join(root, commPath))
		if strings.Count(string(b), "_is_sm120_supported = is_sm120()") != 1 {
			t.Fatal("patched twice")
		}
	}
}

// A crash between writing state.json's temporary copy and renaming it in
// leaves ".state.json" and digits in the journal directory; the next
// command removes it (and nothing else that merely looks like one).
func TestRecoverRemovesStateTemps(t *testing.T) {
	ctx := context.Background()
	root, tr := engineTree(t)
	if _, err := apply(t, enginePatch(t), tr); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, source.StateDirName)
	stale := filepath.Join(dir, ".state.json8159443239748882600")
	keep := []string{filepath.Join(dir, ".state.json.bak"), filepath.Join(dir, ".state.json")}
	for _, p := range append(keep, stale) {
		if err := os.WriteFile(p, []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadState(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s is still there (%v)", stale, err)
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	st, err := ReadState(ctx, tr)
	if err != nil || st.Get("demo") == nil {
		t.Fatalf("the journal lost the applied entry: %v", err)
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smpatch/smpatch/internal/testkit/treetest"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// signalFiles is a tree of three large files and a catalog patch that
// changes each of them, so that an apply takes long enough to be hit in
// the middle.
func signalFiles(t *testing.T) (tree, cat string) {
	t.Helper()
	dir := t.TempDir()
	tree, cat = filepath.Join(dir, "tree"), filepath.Join(dir, "cat")
	files := map[string]string{
		"python/sglang/__init__.py": "",
		"python/sglang/version.py":  "__version__ = \"0.5.9\"\n",
	}
	var diff strings.Builder
	for i := range 3 {
		rel := fmt.Sprintf("python/sglang/srt/layers/mod%d.py", i)
		var b strings.Builder
		b.WriteString("FLAG = False\n")
		for n := range 6000 {
			fmt.Fprintf(&b, "value_%d = %d  # filler of a large module\n", n, n*i)
		}
		files[rel] = b.String()
		fmt.Fprintf(&diff, "--- a/%s\n+++ b/%s\n@@ -1,2 +1,2 @@\n-FLAG = False\n+FLAG = True\n value_0 = 0  # filler of a large module\n", rel, rel)
	}
	treetest.Write(t, tree, files)
	treetest.Write(t, cat, map[string]string{
		"demo.toml":   "name = \"demo\"\nproject = \"sglang\"\nsummary = \"x\"\n[[variant]]\nversions = \">= 0.5.0\"\ndiffs = [\"demo/a.diff\"]\n",
		"demo/a.diff": diff.String(),
	})
	return tree, cat
}

// treeSums is the SHA-256 of every file under root, the journal's only
// with journal set.
func treeSums(t *testing.T, root string, journal bool) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".smpatch" && !journal {
				return fs.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// treeStamps is every file and directory under root, the journal's too,
// with its change time and size: anything written there changes one.
func treeStamps(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			out[p] = fmt.Sprint(sys.Ctim.Nano(), " ", st.Size())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameStamps(a, b map[string]string) bool {
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

func sameSums(a, b map[string][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// strays lists what a killed write could leave under root: temporary
// files (".NAME" and digits, ".NAME.tmp..."); in the journal's directory
// too when journal is set.
func strays(t *testing.T, root string, journal bool) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".smpatch" && !journal {
				return fs.SkipDir
			}
			return nil
		}
		n := d.Name()
		if strings.HasPrefix(n, ".") && n != ".gitignore" && (strings.TrimRight(n, "0123456789") != n || strings.Contains(n, ".tmp")) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// Ctrl-C, or a supervisor's SIGTERM, at any moment of an apply or a
// revert is a clean stop: the command finishes (exit 0), or stops with
// exit 130 and one line saying what it left. Either way the tree is then
// original or patched, as the journal says, with no temporary file left
// anywhere, before any other command has run. Rounds alternate apply and
// revert (whichever the tree is ready for) and SIGINT and SIGTERM, each
// sent at a random moment within about twice a whole command's time.
func TestSignalIsACleanStop(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	bin := linkBinary(t, t.TempDir(), "smpatch")
	tree, cat := signalFiles(t)
	env := append(os.Environ(), "GORACE=atexit_sleep_ms=0", "SMPATCH_CATALOG=", "SMPATCH_REPO=",
		"XDG_CONFIG_HOME="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir())
	command := func(args ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(bin, append(args, "--repo", tree, "--catalog", cat)...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		return cmd, &stderr
	}
	applied := func() bool {
		before := treeStamps(t, tree)
		cmd, stderr := command("status", "--json")
		out, err := cmd.Output()
		if after := treeStamps(t, tree); !sameStamps(before, after) {
			t.Fatalf("status wrote to the tree or its journal")
		}
		if err != nil {
			t.Fatalf("status after the signal: %v\n%s", err, stderr)
		}
		var st struct {
			Patches []struct{ Name string }
		}
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		return len(st.Patches) == 1
	}
	orig := treeSums(t, tree, false)
	t0 := time.Now()
	if cmd, stderr := command("apply", "demo"); cmd.Run() != nil {
		t.Fatalf("apply: %s", stderr)
	}
	window := 2 * time.Since(t0)
	patched := treeSums(t, tree, false)
	if cmd, stderr := command("revert"); cmd.Run() != nil {
		t.Fatalf("revert: %s", stderr)
	}

	rounds := 40
	if n := crashRoundsEnv(); n > 0 {
		rounds = n
	}
	seen := map[string]int{}
	lines130 := map[string]bool{}
	isApplied := false
	for r := range rounds {
		verb := "apply"
		if isApplied {
			verb = "revert"
		}
		args := []string{verb}
		if verb == "apply" {
			args = append(args, "demo")
		}
		sig := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}[r%2]
		before := treeSums(t, tree, true)
		cmd, stderr := command(args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(window))))
		_ = cmd.Process.Signal(sig)
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			seen[verb+" finished"]++
		case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled():
			// Before the program's first millisecond (the Go runtime
			// starting, before package interrupt asks for the signals)
			// the default action ends it, and nothing has run.
			if !sameSums(before, treeSums(t, tree, true)) {
				t.Fatalf("round %d: %s killed by %v after it changed the tree or its journal", r, verb, sig)
			}
			seen[verb+" killed before it started"]++
		case errors.As(err, &ee) && ee.ExitCode() == 130:
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "smpatch: interrupted") {
				t.Fatalf("round %d: %s stopped by %v without its line:\n%s", r, verb, sig, stderr)
			}
			seen[verb+" stopped (130)"]++
			lines130[last] = true
		default:
			t.Fatalf("round %d: %s ended with %v after a %v:\n%s", r, verb, err, sig, stderr)
		}
		isApplied = applied() // status reads, and writes nothing (checked)
		now := treeSums(t, tree, false)
		switch {
		case isApplied && sameSums(now, patched):
		case !isApplied && sameSums(now, orig):
		default:
			t.Fatalf("round %d: after %s and a %v, the tree is neither original nor patched as the journal says (applied=%v)", r, verb, sig, isApplied)
		}
		if s := strays(t, tree, false); len(s) > 0 {
			t.Fatalf("round %d: after %s and a %v, left behind: %s", r, verb, sig, strings.Join(s, ", "))
		}
	}
	if isApplied {
		if cmd, stderr := command("revert"); cmd.Run() != nil {
			t.Fatalf("revert: %s", stderr)
		}
	}
	if cmd, stderr := command("apply", "demo"); cmd.Run() != nil {
		t.Fatalf("apply: %s", stderr)
	}
	if s := strays(t, tree, true); len(s) > 0 {
		t.Fatalf("after a clean apply, left behind: %s", strings.Join(s, ", "))
	}
	t.Logf("%d rounds, signals within %v of the start: %v", rounds, window, seen)
	for l := range lines130 {
		t.Logf("stopped: %s", l)
	}
}

// crashRoundsEnv is $SMPATCH_CRASH_ROUNDS, the rounds of the crash tests.
func crashRoundsEnv() int {
	var n int
	fmt.Sscan(os.Getenv("SMPATCH_CRASH_ROUNDS"), &n)
	return n
}

// linkBinary puts this test binary at dir/name (a hard link, else a copy):
// run under a registered name, it is that program.
func linkBinary(t *testing.T, dir, name string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	if err := os.Link(self, dst); err == nil {
		return dst
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A command waiting for a journal lock another process holds says so after
// half a second, gives up at --lock-timeout with one line (exit 1), and
// stops on Ctrl-C with the interrupt's line (exit 130), never "context
// canceled"; readers and writers alike. --lock-timeout 0 is a usage error.
func TestLockWaitLines(t *testing.T) {
	bin := linkBinary(t, t.TempDir(), "smpatch")
	tree, cat := signalFiles(t)
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	env := append(os.Environ(), "GORACE=atexit_sleep_ms=0", "SMPATCH_CATALOG=", "SMPATCH_REPO=", "XDG_CONFIG_HOME="+t.TempDir())
	command := func(args ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(bin, append(args, "--repo", tree, "--catalog", cat)...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		return cmd, &stderr
	}
	if cmd, stderr := command("apply", "demo"); cmd.Run() != nil {
		t.Fatalf("apply: %s", stderr)
	}
	tr, err := source.OpenCheckout(tree)
	if err != nil {
		t.Fatal(err)
	}
	held, err := journal.Open(context.Background(), tr, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	before := treeSums(t, tree, true)
	for _, verb := range [][]string{{"status"}, {"revert"}, {"journal", "trust"}} {
		cmd, stderr := command(append(verb, "--lock-timeout", "800ms")...)
		start := time.Now()
		err := cmd.Run()
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || len(lines) != 2 ||
			!strings.HasPrefix(lines[0], "smpatch: waiting for the journal lock of "+tree+", held by another smpatch (pid ") || !strings.HasSuffix(lines[0], "; giving up after 800ms (--lock-timeout)") ||
			!strings.HasPrefix(lines[1], "smpatch: the journal of "+tree+" is locked by another smpatch (pid ") || !strings.HasSuffix(lines[1], "gave up after 800ms (--lock-timeout); nothing was changed") {
			t.Fatalf("%s: %v\n%s", verb, err, stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("%s: took %s", verb, d)
		}
		cmd, stderr = command(verb...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(900 * time.Millisecond)
		sent := time.Now()
		_ = cmd.Process.Signal(syscall.SIGINT)
		err = cmd.Wait()
		lines = strings.Split(strings.TrimSpace(stderr.String()), "\n")
		last := lines[len(lines)-1]
		if !errors.As(err, &ee) || ee.ExitCode() != 130 || strings.Contains(stderr.String(), "context canceled") ||
			!strings.Contains(last, "nothing was changed (while waiting for the journal lock of "+tree) {
			t.Fatalf("%s, Ctrl-C: %v\n%s", verb, err, stderr)
		}
		if d := time.Since(sent); d > time.Second {
			t.Fatalf("%s: stopped %s after the signal", verb, d)
		}
	}
	if !sameSums(before, treeSums(t, tree, true)) {
		t.Fatal("a command that waited changed the tree or its journal")
	}
	cmd, stderr := command("status", "--lock-timeout", "0")
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "--lock-timeout 0s: give a positive duration") {
		t.Fatalf("--lock-timeout 0: %v\n%s", err, stderr)
	}
}

package runner

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunOutputAndExit(t *testing.T) {
	res, err := Run(context.Background(), 5*time.Second, "sh", "-c", "echo out; echo err >&2; exit 3")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("err %v", err)
	}
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("%q %q", res.Stdout, res.Stderr)
	}
}

// A wrapper whose child ignores the end of its parent: the timeout kills
// the whole group, and Run returns soon after it.
func TestRunTimeoutKillsGroup(t *testing.T) {
	pidf := filepath.Join(t.TempDir(), "child")
	start := time.Now()
	_, err := Run(context.Background(), 300*time.Millisecond, "sh", "-c", "sleep 30 & echo $! > "+pidf+"; wait")
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
	b, err := os.ReadFile(pidf)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for _, c := range strings.TrimSpace(string(b)) {
		pid = pid*10 + int(c-'0')
	}
	deadline := time.Now().Add(2 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("child %d still alive", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunBoundsOutput(t *testing.T) {
	res, err := Run(context.Background(), 10*time.Second, "sh", "-c", "head -c 20000000 /dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != MaxOutput {
		t.Fatalf("kept %d bytes", len(res.Stdout))
	}
}

package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readPid waits for a pid file a script writes and returns the pid.
func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone waits up to 2s for pid to be gone (or a zombie nobody reaps).
func gone(pid int) bool {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return true
		}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			s := string(b)
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 && f[0] == "Z" {
				return true
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func TestStartSharesOnePipe(t *testing.T) {
	var out bytes.Buffer
	p, err := Start(context.Background(), Command{Argv: []string{"sh", "-c", "echo a; echo b >&2; echo c"}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "a\nb\nc\n" {
		t.Fatalf("%q", out.String())
	}
}

func TestStartEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	p, err := Start(context.Background(), Command{Argv: []string{"sh", "-c", "echo $V; pwd"}, Env: []string{"V=x", "PATH=" + os.Getenv("PATH")}, Dir: dir, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if got := out.String(); got != "x\n"+dir+"\n" && got != "x\n"+real+"\n" {
		t.Fatalf("%q", got)
	}
}

func TestStartCapsOutput(t *testing.T) {
	var out bytes.Buffer
	p, err := Start(context.Background(), Command{Argv: []string{"sh", "-c", "head -c 100000 /dev/zero"}, Stdout: &out, MaxOutput: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 100 || p.Dropped() != 100000-100 {
		t.Fatalf("kept %d, dropped %d", out.Len(), p.Dropped())
	}
}

func TestWaitExitError(t *testing.T) {
	p, err := Start(context.Background(), Command{Argv: []string{"sh", "-c", "exit 7"}})
	if err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := p.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("err %v", err)
	}
}

// The leader exits at once and leaves a child holding the pipe: Wait
// returns soon, and the child goes with its group.
func TestWaitEndsWhatTheLeaderLeft(t *testing.T) {
	pidf := filepath.Join(t.TempDir(), "child")
	start := time.Now()
	p, err := Start(context.Background(), Command{Argv: []string{"sh", "-c", "sleep 30 & echo $! > " + pidf}, Stdout: &bytes.Buffer{}, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
	if pid := readPid(t, pidf); !gone(pid) {
		t.Fatalf("child %d still alive", pid)
	}
}

// A group that ignores SIGTERM is killed after the grace.
func TestStopKillsAfterGrace(t *testing.T) {
	pidf := filepath.Join(t.TempDir(), "child")
	p, err := Start(context.Background(), Command{Argv: []string{"sh", "-c", "trap '' TERM; sleep 30 & echo $! > " + pidf + "; wait"}})
	if err != nil {
		t.Fatal(err)
	}
	child := readPid(t, pidf)
	start := time.Now()
	if err := p.Stop(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Fatalf("stopped after %s", d)
	}
	if !gone(child) {
		t.Fatalf("child %d still alive", child)
	}
	var ee *exec.ExitError
	if err := p.ExitErr(); !errors.As(err, &ee) {
		t.Fatalf("exit %v", err)
	}
}

// A group that ends on SIGTERM does not wait for the grace.
func TestStopTermEndsGroup(t *testing.T) {
	p, err := Start(context.Background(), Command{Argv: []string{"sh", "-c", "sleep 30 & wait"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := p.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stopped after %s", d)
	}
	if err := p.Stop(time.Minute); err != nil { // once
		t.Fatal(err)
	}
}

// The end of Start's context stops the whole group, and Wait says why.
func TestStartContextStopsGroup(t *testing.T) {
	pidf := filepath.Join(t.TempDir(), "child")
	ctx, cancel := context.WithCancel(context.Background())
	p, err := Start(ctx, Command{Argv: []string{"sh", "-c", "sleep 30 & echo $! > " + pidf + "; wait"}, Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	child := readPid(t, pidf)
	cancel()
	start := time.Now()
	if err := p.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %s", d)
	}
	if !gone(child) {
		t.Fatalf("child %d still alive", child)
	}
}

func TestStartTimeout(t *testing.T) {
	p, err := Start(context.Background(), Command{Argv: []string{"sleep", "30"}, Timeout: 200 * time.Millisecond, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("err %v", err)
	}
}

func TestStartRefusesNothing(t *testing.T) {
	if _, err := Start(context.Background(), Command{}); err == nil {
		t.Fatal("started an empty command")
	}
	if _, err := Start(context.Background(), Command{Argv: []string{"/no/such/program"}}); err == nil {
		t.Fatal("started a missing program")
	}
}

// A server that daemonizes (setsid, a double fork) leaves the process
// group: Stop finds it by the mark its environment inherited and ends it
// with the group, so it never outlives the run holding GPUs and a port.
func TestStopEndsProcessesThatLeftTheGroup(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	dir := t.TempDir()
	script := `setsid sleep 60 & echo $! > ` + dir + `/a
(setsid sh -c 'trap "" TERM; sleep 60 & echo $! > ` + dir + `/b; wait' &)
sleep 60`
	p, err := Start(context.Background(), Command{Argv: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := readPid(t, filepath.Join(dir, "a")), readPid(t, filepath.Join(dir, "b"))
	if pg, _ := syscall.Getpgid(a); pg == p.Pid() {
		t.Fatal("the daemon did not leave the group: the test proves nothing")
	}
	start := time.Now()
	if err := p.Stop(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{a, b} {
		if !gone(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("process %d, which left the group, outlived Stop", pid)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Stop took %s", d)
	}
}

// A short command whose helper detaches (nvidia-smi's grandchild, say) is
// not left behind by Run.
func TestRunEndsDetachedGrandchild(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	dir := t.TempDir()
	if _, err := Run(context.Background(), 10*time.Second, "sh", "-c", "setsid sleep 60 & echo $! > "+dir+"/a; echo done"); err != nil {
		t.Fatal(err)
	}
	if pid := readPid(t, filepath.Join(dir, "a")); !gone(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the detached grandchild %d outlived Run", pid)
	}
}

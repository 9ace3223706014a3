package sigwatch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// interrupt sends SIGINT to this process; only when a watch catches it,
// or the test binary dies.
func interrupt(t *testing.T, ctx context.Context) {
	t.Helper()
	if !caught(ctx) {
		t.Fatal("not catching signals: SIGINT would kill the test")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
}

func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("context ended with %v, want context.Canceled", ctx.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the signal did not cancel the context")
	}
}

func TestCatchAtOnce(t *testing.T) {
	ctx, stop := Catch(context.Background(), 0)
	defer stop()
	interrupt(t, ctx)
	waitDone(t, ctx)
}

func TestCatchAfterDelay(t *testing.T) {
	ctx, stop := Catch(context.Background(), time.Hour)
	if caught(ctx) {
		t.Fatal("catching before the delay")
	}
	stop()

	ctx, stop = Catch(context.Background(), 10*time.Millisecond)
	defer stop()
	for deadline := time.Now().Add(10 * time.Second); !caught(ctx); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watch did not start after its delay")
		}
	}
	interrupt(t, ctx)
	waitDone(t, ctx)
}

func TestNowStartsTheWatch(t *testing.T) {
	ctx, stop := Catch(context.Background(), time.Hour)
	defer stop()
	Now(ctx)
	Now(ctx) // once is enough; twice changes nothing
	interrupt(t, ctx)
	waitDone(t, ctx)
}

func TestStopEndsTheWatch(t *testing.T) {
	ctx, stop := Catch(context.Background(), time.Hour)
	stop()
	if ctx.Err() == nil {
		t.Fatal("stop left the context running")
	}
	Now(ctx)
	if caught(ctx) {
		t.Fatal("a stopped watch started")
	}
	stop() // twice is harmless

	ctx, stop = Catch(context.Background(), 0)
	stop()
	if caught(ctx) {
		t.Fatal("a stopped watch still catches")
	}
	// Now of a context with no watch does nothing.
	Now(context.Background())
	if caught(context.Background()) {
		t.Fatal("a context with no watch catches")
	}
}

// TestChildSignalled is the child of TestSignalBeforeDelayIsDefault.
func TestChildSignalled(t *testing.T) {
	mode := os.Getenv("SIGWATCH_CHILD")
	if mode == "" {
		t.Skip("child of TestSignalBeforeDelayIsDefault")
	}
	ctx, stop := Catch(context.Background(), time.Hour)
	defer stop()
	if mode == "now" {
		Now(ctx)
	}
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case <-ctx.Done():
		os.Exit(3)
	case <-time.After(10 * time.Second):
		os.Exit(4)
	}
}

// Before the delay, SIGINT takes its default action: the process ends,
// killed by the signal; after Now, it cancels the context.
func TestSignalBeforeDelayIsDefault(t *testing.T) {
	for _, c := range []struct {
		mode   string
		killed bool
		code   int
	}{{"delay", true, 0}, {"now", false, 3}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildSignalled$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SIGWATCH_CHILD="+c.mode)
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: the child ended with %v", c.mode, err)
		}
		ws := ee.Sys().(syscall.WaitStatus)
		if c.killed {
			if !ws.Signaled() || ws.Signal() != syscall.SIGINT {
				t.Errorf("%s: the child ended with %v, want killed by SIGINT", c.mode, err)
			}
		} else if ws.Signaled() || ws.ExitStatus() != c.code {
			t.Errorf("%s: the child ended with %v, want exit %d", c.mode, err, c.code)
		}
	}
}

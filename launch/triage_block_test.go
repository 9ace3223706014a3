package launch

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A named pipe nobody writes to, and an endless device, once hung triage
// for good: the open blocked (and SIGTERM was caught, so nothing ended it)
// or the reading never finished.
func TestTriageFileDoesNotBlock(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	done := make(chan error, 1)
	go func() {
		v, err := DefaultSignatures().TriageFileContext(context.Background(), fifo)
		if err == nil && v.Known {
			err = errors.New("an empty pipe matched a signature")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("triage of a named pipe nobody writes to did not return")
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, err := DefaultSignatures().TriageFileContext(ctx, "/dev/zero")
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("triage of /dev/zero did not stop when cancelled")
	}
}

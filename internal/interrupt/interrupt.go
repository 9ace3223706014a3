// Package interrupt turns SIGINT and SIGTERM into the cancellation of the
// program's context, from the first moments of the process on: its init
// asks for the signals as soon as os/signal is ready, long before the
// program's other packages have initialised, so that a Ctrl-C at any
// moment is a clean stop (the command stops, cleans up, says what it left
// and exits 130), never the default action's silent kill.
//
// It knows nothing of commands or of what they write.
package interrupt

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// caught holds a signal received before Context was called.
var caught = make(chan os.Signal, 1)

func init() { signal.Notify(caught, os.Interrupt, syscall.SIGTERM) }

// Context returns a context that the first SIGINT or SIGTERM cancels (one
// received before the call included), and the function that ends the
// watch. Signals that follow the first are absorbed: the command is
// already stopping.
func Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-caught:
			cancel(&Signal{s})
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		cancel(context.Canceled)
	}
}

// A Signal is the cause of a context Context cancelled.
type Signal struct{ os.Signal }

func (s *Signal) Error() string { return "interrupted by " + Name(s.Signal) }

// Name is the signal's name as kill(1) spells it: SIGINT, SIGTERM.
func Name(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// Received reports whether ctx, or a context it derives from, was
// cancelled by a signal, and which.
func Received(ctx context.Context) (os.Signal, bool) {
	if s, ok := context.Cause(ctx).(*Signal); ok {
		return s.Signal, true
	}
	return nil, false
}

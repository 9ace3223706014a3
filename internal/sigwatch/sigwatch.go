// Package sigwatch turns SIGINT and SIGTERM into the cancellation of a
// command's context, so that the command stops, cleans up and exits 130.
//
// Catching a signal costs a Go program more than the catching: os/signal
// keeps a thread of its own for the signal masks, another to start it and
// two goroutines, about a tenth of the CPU time of an apply on tmpfs. A
// command that may be killed outright at any point can therefore ask for
// the watch to start only once it has run for a while (Catch with a
// delay): a command that is done sooner never pays for it, and a signal
// before then ends the process as the default action does. That is safe
// where everything the command writes is either journaled (the next
// command recovers it: the files restored, temporary files removed) or
// nothing at all; before such a command does anything else a kill would
// leave behind (starts a child process, creates an output file), it calls
// Now, and signals are caught from then on.
//
// The package knows nothing of commands or journals.
package sigwatch

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// watch is the state of one Catch.
type watch struct {
	mu      sync.Mutex
	cancel  context.CancelFunc
	done    <-chan struct{}
	timer   *time.Timer    // the delayed start; nil when started at once
	ch      chan os.Signal // set once started
	stopped bool
}

type key struct{}

// Catch returns a context that SIGINT or SIGTERM cancels, and the function
// that stops the watch (and cancels the context). With after > 0 the
// signals are caught from after on, or from the first Now, whichever is
// earlier; before that they take their default action.
func Catch(parent context.Context, after time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	w := &watch{cancel: cancel, done: ctx.Done()}
	ctx = context.WithValue(ctx, key{}, w)
	if after <= 0 {
		w.start()
	} else {
		w.mu.Lock()
		w.timer = time.AfterFunc(after, w.start)
		w.mu.Unlock()
	}
	return ctx, w.stop
}

// Now makes the watch of ctx, if it has one, catch signals from now on.
func Now(ctx context.Context) {
	if w, ok := ctx.Value(key{}).(*watch); ok {
		w.start()
	}
}

// caught reports whether signals are being caught for ctx: its watch has
// started and not stopped.
func caught(ctx context.Context) bool {
	w, ok := ctx.Value(key{}).(*watch)
	if !ok {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch != nil && !w.stopped
}

func (w *watch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil || w.stopped {
		return
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	w.ch = make(chan os.Signal, 1)
	signal.Notify(w.ch, os.Interrupt, syscall.SIGTERM)
	ch, done, cancel := w.ch, w.done, w.cancel
	go func() {
		select {
		case <-ch:
			cancel()
		case <-done:
		}
	}()
}

func (w *watch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.stopped = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.ch != nil {
		signal.Stop(w.ch)
	}
	w.cancel()
}

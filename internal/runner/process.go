package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Command is what Start runs.
type Command struct {
	// Argv is the program and its arguments; the program is looked up on
	// PATH when it has no slash.
	Argv []string
	// Env is the whole environment; nil is this process's.
	Env []string
	// Dir is the working directory; "" is this process's.
	Dir string
	// Stdout and Stderr receive the output as it comes, from pipes of
	// Start's own (so the leader's exit is seen at once even while
	// processes it left hold them open). A nil Stdout is discarded; a nil
	// Stderr shares Stdout's pipe, the two streams in the order written.
	// Each pipe is written from one goroutine.
	Stdout, Stderr io.Writer
	// MaxOutput bounds what is passed on of each pipe; the rest is read
	// and dropped (Dropped says how much), so the process never blocks on
	// a full pipe. 0 is MaxOutput.
	MaxOutput int64
	// Timeout, when not 0, stops the group that long after the start, as
	// the end of Start's ctx does; Wait's error then wraps ErrTimeout.
	Timeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL when the group is
	// stopped because ctx ended or Timeout passed; 0 sends SIGKILL at once.
	Grace time.Duration
}

// Process is a command started as the leader of a process group of its
// own, so that it and everything it starts are signalled together.
type Process struct {
	cmd     *exec.Cmd
	pgid    int
	started time.Time
	grace   time.Duration
	exited  chan struct{}
	err     error // the leader's end, once exited is closed

	pipes   []*os.File    // read ends of the output pipes
	copied  chan struct{} // closed when every copy from pipes ended
	dropped int64         // bytes read past MaxOutput, once copied is closed

	mark   string // the environment entry every descendant inherits: MarkPrefix + a token
	marked []int  // processes carrying the mark outside the group, once stop signalled them

	stopOnce sync.Once
	stopErr  error
	whyMu    sync.Mutex  // guards why and unwatch
	why      error       // set before the group is stopped by ctx or Timeout
	unwatch  func() bool // ends the watch of Start's ctx
}

// outputDrain bounds how long Stop waits for output still in the pipes
// once the group is gone (a process that left the group may hold them).
const outputDrain = 2 * time.Second

// Start starts c. When ctx ends (or c.Timeout passes) before the leader
// exits, the whole group is stopped: SIGTERM, then SIGKILL after c.Grace.
// A process meant to outlive the caller's context is started with
// context.Background() and ended with Stop.
func Start(ctx context.Context, c Command) (*Process, error) {
	if len(c.Argv) == 0 {
		return nil, errors.New("empty command")
	}
	max := c.MaxOutput
	if max <= 0 {
		max = MaxOutput
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	p := &Process{cmd: cmd, grace: c.Grace, exited: make(chan struct{}), copied: make(chan struct{}), mark: newMark()}
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env, cmd.Dir = append(slices.Clip(env), p.mark), c.Dir
	setGroupOnly(cmd)

	var writes []*os.File // write ends, closed here once the child has them
	var copies []func() int64
	pipe := func(w io.Writer) (*os.File, error) {
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		p.pipes = append(p.pipes, pr)
		writes = append(writes, pw)
		copies = append(copies, func() int64 { return copyCapped(w, pr, max) })
		return pw, nil
	}
	closeAll := func() {
		for _, f := range append(writes, p.pipes...) {
			f.Close()
		}
	}
	var err error
	if cmd.Stdout, err = pipe(c.Stdout); err != nil {
		closeAll()
		return nil, err
	}
	if c.Stderr == nil {
		cmd.Stderr = cmd.Stdout
	} else if cmd.Stderr, err = pipe(c.Stderr); err != nil {
		closeAll()
		return nil, err
	}
	err = cmd.Start()
	for _, f := range writes {
		f.Close()
	}
	if err != nil {
		for _, f := range p.pipes {
			f.Close()
		}
		return nil, err
	}
	p.started = time.Now()
	p.pgid = cmd.Process.Pid
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, cp := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := cp()
			mu.Lock()
			p.dropped += n
			mu.Unlock()
		}()
	}
	go func() {
		wg.Wait()
		close(p.copied)
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	p.watch(ctx, c.Timeout)
	return p, nil
}

// watch stops the group when ctx ends or timeout passes before the leader
// exits.
func (p *Process) watch(ctx context.Context, timeout time.Duration) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		go func() {
			<-p.exited
			cancel()
		}()
	}
	unwatch := context.AfterFunc(ctx, func() {
		select {
		case <-p.exited:
			return
		default:
		}
		why := ctx.Err()
		if errors.Is(why, context.DeadlineExceeded) {
			why = fmt.Errorf("%w after %s", ErrTimeout, time.Since(p.started).Round(100*time.Millisecond))
		}
		p.whyMu.Lock()
		p.why = why
		p.whyMu.Unlock()
		_ = p.Stop(p.grace)
	})
	p.whyMu.Lock()
	p.unwatch = unwatch
	p.whyMu.Unlock()
}

// copyCapped copies r to w (nil: nowhere), passing on at most max bytes,
// and reads the rest to its end; it returns how many bytes were dropped.
func copyCapped(w io.Writer, r io.Reader, max int64) int64 {
	if w == nil {
		w = io.Discard
	}
	n, _ := io.Copy(w, io.LimitReader(r, max))
	if n < max {
		return 0 // the end (or a read cut off by Stop)
	}
	rest, _ := io.Copy(io.Discard, r)
	return rest
}

// Pid is the leader's process id, which is also the group's.
func (p *Process) Pid() int { return p.pgid }

// Exited is closed once the leader has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is how the leader ended (nil for status 0; an *exec.ExitError
// otherwise). It waits for the leader's exit.
func (p *Process) ExitErr() error {
	<-p.exited
	return p.err
}

// Wait waits for the leader to exit, then stops what it left in its group
// (SIGTERM, SIGKILL after the Grace of its Command) and waits for the
// output. The error says why the command ended: ctx's error, or one that
// wraps ErrTimeout, when those stopped it; else the leader's own.
func (p *Process) Wait() error {
	<-p.exited
	stopErr := p.Stop(p.grace)
	p.whyMu.Lock()
	why := p.why
	p.whyMu.Unlock()
	if why != nil {
		return why
	}
	if p.err != nil {
		return p.err
	}
	return stopErr
}

// Dropped is how many bytes of output MaxOutput kept from the writers; it
// is final once Stop or Wait returned.
func (p *Process) Dropped() int64 {
	select {
	case <-p.copied:
		return p.dropped
	default:
		return 0
	}
}

// Stop ends the group: SIGTERM, up to grace for the leader to exit and the
// group to empty, then SIGKILL (at once when grace is 0). It returns once
// the group is gone and the output is copied, or with an error saying what
// could not be stopped. Only the first call does anything; later ones
// return its result.
func (p *Process) Stop(grace time.Duration) error {
	p.stopOnce.Do(func() {
		p.stopErr = p.stop(grace)
		p.whyMu.Lock()
		unwatch := p.unwatch
		p.whyMu.Unlock()
		if unwatch != nil {
			unwatch()
		}
	})
	return p.stopErr
}

// stop ends the group and every process that carries the command's mark
// in its environment, also those that left the group (setsid, a double
// fork: a daemonizing server): SIGTERM, up to grace for all to end, then
// SIGKILL; processes the marked ones start meanwhile are found again
// before the end.
func (p *Process) stop(grace time.Duration) error {
	defer p.drain()
	if grace > 0 {
		_ = terminateGroup(p.pgid)
		p.marked = signalMarked(p.mark, syscall.SIGTERM)
		if p.waitGone(grace) && len(signalMarked(p.mark, syscall.SIGKILL)) == 0 {
			return nil
		}
	}
	_ = killGroup(p.pgid)
	for range 5 {
		p.marked = signalMarked(p.mark, syscall.SIGKILL)
		if !p.waitGone(time.Second) {
			continue
		}
		if len(signalMarked(p.mark, syscall.SIGKILL)) == 0 {
			return nil
		}
	}
	return fmt.Errorf("process group %d (or a process it started) still runs after SIGKILL", p.pgid)
}

// MarkPrefix starts the name of the environment entry Start gives each
// command (MarkPrefix + a token of its own, "=1"), which everything it
// starts inherits unless it clears its environment: Stop finds by it the
// processes that left the command's process group.
const MarkPrefix = "SMPATCH_RUN_"

func newMark() string {
	var b [8]byte
	rand.Read(b[:])
	return MarkPrefix + hex.EncodeToString(b[:]) + "=1"
}

// drain waits for the output copies to end, cutting them off after
// outputDrain, and closes the pipes.
func (p *Process) drain() {
	t := time.NewTimer(outputDrain)
	defer t.Stop()
	select {
	case <-p.copied:
	case <-t.C:
		for _, f := range p.pipes {
			f.SetReadDeadline(time.Now())
		}
		<-p.copied
	}
	for _, f := range p.pipes {
		f.Close()
	}
}

// waitGone waits up to d for the leader to be reaped and the group to be
// empty.
func (p *Process) waitGone(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.exited:
			if !groupAlive(p.pgid) && !anyAlive(p.marked) {
				return true
			}
		default:
		}
		select {
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
}

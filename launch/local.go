package launch

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/smpatch/smpatch/internal/runner"
)

// Local runs cells as process groups on this host.
type Local struct{}

// Kind implements Runner.
func (Local) Kind() RunnerKind { return RunnerLocal }

// Check implements Runner: the local runner needs nothing.
func (Local) Check(context.Context) error { return nil }

// MaxCellLog bounds what a cell's log keeps of each stream a server writes
// (its own output, and run.sh's log): the rest is read and dropped, with a
// note at the end of the log, so that a server printing without end fills
// neither the disk nor a pipe.
const MaxCellLog = 4 << 30

// execGrace is the time between SIGTERM and SIGKILL for a command run
// beside a server (the bench) when it is stopped.
const execGrace = time.Second

// Start implements Runner: the cell's rendered run.sh (or, without one, its
// command) in a process group of its own, with the cell's environment added
// to smpatch's. run.sh sends the server's output to $SMPATCH_LOG_DIR/<id>.log:
// that is a named pipe here, read into log like the script's own output.
// The server outlives ctx: Stop ends it.
func (Local) Start(ctx context.Context, c *Cell, log io.Writer) (Server, error) {
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("cell %s: no command", c.ID)
	}
	argv, env, dir := c.Command, c.Env, c.Workdir
	if len(c.gpus) > 0 || c.script != "" {
		env = maps.Clone(c.Env)
		if env == nil {
			env = map[string]string{}
		}
	}
	if len(c.gpus) > 0 {
		env["CUDA_VISIBLE_DEVICES"] = strings.Join(c.gpus, ",")
	}
	var fl *fifoLog
	if c.script != "" {
		var err error
		if fl, err = newFifoLog(c.ID, log); err != nil {
			return nil, fmt.Errorf("cell %s: %w", c.ID, err)
		}
		env["SMPATCH_LOG_DIR"] = fl.dir
		argv, dir = []string{"bash", c.script}, ""
	}
	p, err := runner.Start(context.Background(), runner.Command{Argv: argv, Env: envList(env), Dir: dir, Stdout: log, MaxOutput: MaxCellLog})
	if err != nil {
		if fl != nil {
			fl.f.Close()
			os.RemoveAll(fl.dir)
		}
		return nil, fmt.Errorf("cell %s: %w", c.ID, err)
	}
	if fl != nil {
		go fl.copy()
	}
	return &localServer{proc: p, fifo: fl, log: log, env: env, dir: c.Workdir}, nil
}

type localServer struct {
	proc *runner.Process
	fifo *fifoLog // run.sh's log (nil without run.sh)
	log  io.Writer
	env  map[string]string
	dir  string

	once sync.Once
	err  error
}

func (s *localServer) Exited() <-chan struct{} { return s.proc.Exited() }

func (s *localServer) ExitErr() error { return s.proc.ExitErr() }

// Exec runs argv on this host with the cell's environment.
func (s *localServer) Exec(ctx context.Context, argv []string, out io.Writer) error {
	return runBeside(ctx, argv, envList(s.env), s.dir, out)
}

// Stop ends the server's process group (SIGTERM, SIGKILL after grace) and
// waits for what it printed.
func (s *localServer) Stop(grace time.Duration) error {
	s.once.Do(func() {
		s.err = s.proc.Stop(grace)
		dropped := s.proc.Dropped()
		if s.fifo != nil {
			dropped += s.fifo.close()
		}
		noteDropped(s.log, dropped)
	})
	return s.err
}

// runBeside runs argv to its end in a process group of its own, its output
// to out; cancelling ctx ends the whole group (SIGTERM, then SIGKILL a
// second later), and so does its leader's exit.
func runBeside(ctx context.Context, argv, env []string, dir string, out io.Writer) error {
	p, err := runner.Start(ctx, runner.Command{Argv: argv, Env: env, Dir: dir, Stdout: out, MaxOutput: MaxCellLog, Grace: execGrace})
	if err != nil {
		return err
	}
	return p.Wait()
}

// noteDropped says in the log how much output MaxCellLog kept out of it.
func noteDropped(log io.Writer, n int64) {
	if n <= 0 {
		return
	}
	text := fmt.Sprintf("the server's output past %d GiB was dropped from this log (%d bytes)", MaxCellLog>>30, n)
	if s, ok := log.(*logSink); ok {
		s.Note(text)
		return
	}
	fmt.Fprintf(log, "%s%s\n", NotePrefix, text)
}

// envList is os.Environ with env added, in a stable order.
func envList(env map[string]string) []string {
	keys := slices.Sorted(maps.Keys(env))
	out := os.Environ()
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

// fifoLog is run.sh's log: a named pipe in a directory of its own, read
// into the cell's log as it is written.
type fifoLog struct {
	dir     string
	f       *os.File
	out     io.Writer
	done    chan struct{}
	dropped int64
}

func newFifoLog(id string, out io.Writer) (*fifoLog, error) {
	dir, err := os.MkdirTemp("", "smpatch-log-")
	if err != nil {
		return nil, err
	}
	name := filepath.Join(dir, id+".log")
	if err := syscall.Mkfifo(name, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// Opened for reading and writing, the pipe never blocks the open and
	// never reports end of file; close cuts the reading off.
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &fifoLog{dir: dir, f: f, out: out, done: make(chan struct{})}, nil
}

// copy reads the pipe into the log, at most MaxCellLog bytes of it.
func (l *fifoLog) copy() {
	defer close(l.done)
	n, _ := io.Copy(l.out, io.LimitReader(l.f, MaxCellLog))
	if n == MaxCellLog {
		l.dropped, _ = io.Copy(io.Discard, l.f)
	}
}

// close reads what is left in the pipe once every writer is gone, removes
// it and returns how many bytes were dropped.
func (l *fifoLog) close() int64 {
	select {
	case <-l.done:
	default:
		l.f.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		select {
		case <-l.done:
		case <-time.After(5 * time.Second):
		}
	}
	l.f.Close()
	os.RemoveAll(l.dir)
	return l.dropped
}

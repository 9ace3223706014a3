package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Local runs cells as process groups on this host.
type Local struct{}

// Name implements Runner.
func (Local) Name() string { return "local" }

// Start implements Runner: the cell's rendered run.sh (or, without one, its
// command) in a process group of its own, with the cell's environment added
// to smpatch's. run.sh sends the server's output to $SMPATCH_LOG_DIR/<id>.log:
// that is a named pipe here, read into log like the script's own output.
func (Local) Start(ctx context.Context, c *Cell, log io.Writer) (Server, error) {
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("cell %s: no command", c.ID)
	}
	argv, env, dir := c.Command, c.Env, c.Workdir
	if len(c.gpus) > 0 || c.script != "" {
		env = make(map[string]string, len(c.Env)+2)
		for k, v := range c.Env {
			env[k] = v
		}
	}
	if len(c.gpus) > 0 {
		env["CUDA_VISIBLE_DEVICES"] = strings.Join(c.gpus, ",")
	}
	var fifo *os.File
	var fifoDir string
	if c.script != "" {
		var err error
		if fifoDir, err = os.MkdirTemp("", "smpatch-log-"); err != nil {
			return nil, err
		}
		name := filepath.Join(fifoDir, c.ID+".log")
		if err := syscall.Mkfifo(name, 0o600); err != nil {
			os.RemoveAll(fifoDir)
			return nil, fmt.Errorf("cell %s: %w", c.ID, err)
		}
		// Opened for reading and writing, the pipe never blocks the open
		// and never reports end of file; Stop cuts the reading off.
		if fifo, err = os.OpenFile(name, os.O_RDWR, 0); err != nil {
			os.RemoveAll(fifoDir)
			return nil, fmt.Errorf("cell %s: %w", c.ID, err)
		}
		env["SMPATCH_LOG_DIR"] = fifoDir
		argv, dir = []string{"bash", c.script}, ""
	}
	g, err := startGroup(argv, env, dir, log)
	if err != nil {
		if fifo != nil {
			fifo.Close()
			os.RemoveAll(fifoDir)
		}
		return nil, fmt.Errorf("cell %s: %w", c.ID, err)
	}
	if fifo != nil {
		g.fifo, g.fifoDir, g.fifoDone = fifo, fifoDir, make(chan struct{})
		go func() {
			io.Copy(log, fifo)
			close(g.fifoDone)
		}()
	}
	return &localServer{group: g, env: env, dir: c.Workdir}, nil
}

type localServer struct {
	*group
	env map[string]string
	dir string
}

func (s *localServer) Exec(ctx context.Context, argv []string, out io.Writer) error {
	return runGroup(ctx, argv, s.env, s.dir, out)
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

// group is a process started as the leader of its own process group, so that
// it and every process it starts can be signalled together. Its output is
// copied from a pipe of our own, so the leader's exit is seen at once even
// while its workers still hold the pipe open.
type group struct {
	cmd     *exec.Cmd
	pgid    int
	exited  chan struct{}
	err     error
	out     *os.File      // read end of the output pipe
	outDone chan struct{} // closed when the copy from out ends
	// fifo is run.sh's log, a named pipe in fifoDir (nil without run.sh).
	fifo     *os.File
	fifoDir  string
	fifoDone chan struct{}

	stopOnce sync.Once
	stopErr  error
}

// outputDrain bounds how long Stop waits for output still in the pipe once
// the group is gone (a process that left the group may hold the pipe).
const outputDrain = 2 * time.Second

func startGroup(argv []string, env map[string]string, dir string, out io.Writer) (*group, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = envList(env)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, err
	}
	g := &group{cmd: cmd, pgid: cmd.Process.Pid, exited: make(chan struct{}), out: pr, outDone: make(chan struct{})}
	go func() {
		io.Copy(out, pr)
		close(g.outDone)
	}()
	go func() {
		g.err = cmd.Wait()
		close(g.exited)
	}()
	return g, nil
}

func (g *group) Exited() <-chan struct{} { return g.exited }

func (g *group) ExitErr() error {
	<-g.exited
	return g.err
}

// alive reports whether any process of the group is left. A leader that has
// exited but was not yet waited for still counts; orphaned zombies (whose
// reaper is slow or absent) do not.
func (g *group) alive() bool {
	err := syscall.Kill(-g.pgid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	live, ok := liveMembers(g.pgid)
	return !ok || live
}

// liveMembers scans /proc for a process of group pgid that is not a zombie.
// ok is false when /proc cannot be read.
func liveMembers(pgid int) (live, ok bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false, false
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 {
			continue
		}
		if pg, _ := strconv.Atoi(f[2]); pg == pgid && f[0] != "Z" && f[0] != "X" {
			return true, true
		}
	}
	return false, true
}

// Stop sends SIGTERM to the group, waits up to grace for the leader to exit
// and the group to empty, then sends SIGKILL.
func (g *group) Stop(grace time.Duration) error {
	g.stopOnce.Do(func() { g.stopErr = g.stop(grace) })
	return g.stopErr
}

func (g *group) stop(grace time.Duration) error {
	defer g.drain()
	_ = syscall.Kill(-g.pgid, syscall.SIGTERM)
	if g.waitGone(grace) {
		return nil
	}
	_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
	if g.waitGone(5 * time.Second) {
		return nil
	}
	return fmt.Errorf("process group %d still has processes after SIGKILL", g.pgid)
}

// drain waits for the output copy to end, cutting it off after outputDrain.
func (g *group) drain() {
	t := time.NewTimer(outputDrain)
	defer t.Stop()
	select {
	case <-g.outDone:
	case <-t.C:
		g.out.SetReadDeadline(time.Now())
		<-g.outDone
	}
	g.out.Close()
	if g.fifo != nil {
		// Every writer is gone: what is left is in the pipe's buffer.
		g.fifo.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		<-g.fifoDone
		g.fifo.Close()
		os.RemoveAll(g.fifoDir)
	}
}

// waitGone waits up to d for the leader to be reaped and the group to be empty.
func (g *group) waitGone(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-g.exited:
			if !g.alive() {
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

// runGroup runs argv to completion in a process group of its own; cancelling
// ctx ends the whole group (SIGTERM, then SIGKILL a second later).
func runGroup(ctx context.Context, argv []string, env map[string]string, dir string, out io.Writer) error {
	if len(argv) == 0 {
		return errors.New("empty command")
	}
	g, err := startGroup(argv, env, dir, out)
	if err != nil {
		return err
	}
	select {
	case <-g.exited:
		// Workers the command left behind go with it.
		_ = g.Stop(time.Second)
		return g.err
	case <-ctx.Done():
		_ = g.Stop(time.Second)
		return ctx.Err()
	}
}

package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"
)

// MaxOutput bounds what is kept of each of stdout and stderr.
const MaxOutput = 16 << 20

// ErrTimeout is wrapped by Run's error when the timeout ended the command.
var ErrTimeout = errors.New("timed out")

// Result is what a command printed and how long it ran.
type Result struct {
	Stdout, Stderr []byte
	Elapsed        time.Duration
}

// Run runs name with args, without stdin, and waits at most timeout. When
// the timeout (or ctx) ends it, its whole process group is killed and the
// error wraps ErrTimeout (or ctx's error); a non-zero exit is an
// *exec.ExitError. The Result is filled in every case.

func Run(ctx context.Context, timeout time.Duration, name string, args ...string) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	stdout := &capped{max: MaxOutput}
	stderr := &capped{max: MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	setGroup(cmd)
	// Children that keep the pipes open must not hang us past the deadline.
	cmd.WaitDelay = 500 * time.Millisecond
	start := time.Now()
	err := cmd.Run()
	res := &Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Elapsed: time.Since(start)}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return res, fmt.Errorf("%w after %s", ErrTimeout, res.Elapsed.Round(100*time.Millisecond))
		}
		return res, ctx.Err()
	}
	return res, err
}

// capped is a buffer that keeps the first max bytes written to it and
// discards the rest.
// It has no ReadFrom, so copies go through Write.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capped) Bytes() []byte { return c.buf.Bytes() }

package runner

import (
	"bytes"
	"context"
	"errors"
	"time"
)

// MaxOutput bounds what is kept of each of stdout and stderr.
const MaxOutput = 16 << 20

// ErrTimeout is wrapped by the error of a command its timeout ended.
var ErrTimeout = errors.New("timed out")

// Result is what a command printed and how long it ran.
type Result struct {
	Stdout, Stderr []byte
	Elapsed        time.Duration
}

// Run runs name with args, without stdin, and waits at most timeout. When
// the timeout (or ctx) ends it, its whole process group is killed and the
// error wraps ErrTimeout (or is ctx's error); a non-zero exit is an
// *exec.ExitError. Processes the command leaves in its group are killed
// when it exits. The Result is filled in every case.
func Run(ctx context.Context, timeout time.Duration, name string, args ...string) (*Result, error) {
	var stdout, stderr bytes.Buffer
	start := time.Now()
	p, err := Start(ctx, Command{Argv: append([]string{name}, args...), Stdout: &stdout, Stderr: &stderr, Timeout: timeout})
	if err != nil {
		return &Result{Elapsed: time.Since(start)}, err
	}
	err = p.Wait()
	return &Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Elapsed: time.Since(start)}, err
}

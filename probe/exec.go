package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// DefaultTimeout bounds every external command the probe runs.
const DefaultTimeout = 10 * time.Second

// runTool runs name with args under timeout and returns its stdout. Errors
// are one line naming the command: not found, timed out, or its exit status
// with the last line of its stderr.
func runTool(ctx context.Context, timeout time.Duration, name string, args ...string) ([]byte, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	display := strings.TrimSpace(name + " " + strings.Join(args, " "))
	path, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("%s: not found", name)
		}
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 500 * time.Millisecond
	err = cmd.Run()
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s: timed out after %s", display, time.Since(start).Round(100*time.Millisecond))
		}
		return nil, fmt.Errorf("%s: %w", display, ctx.Err())
	}
	if err != nil {
		if l := lastLine(stderr.String()); l != "" {
			return stdout.Bytes(), fmt.Errorf("%s: %v: %s", display, err, l)
		}
		if l := lastLine(stdout.String()); l != "" {
			return stdout.Bytes(), fmt.Errorf("%s: %v: %s", display, err, l)
		}
		return stdout.Bytes(), fmt.Errorf("%s: %v", display, err)
	}
	return stdout.Bytes(), nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			if len(l) > 200 {
				l = l[:200] + "..."
			}
			return l
		}
	}
	return ""
}

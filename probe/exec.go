package probe

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/smpatch/smpatch/internal/runner"
)

// DefaultTimeout bounds a whole probe: every command it runs and every file
// it reads.
const DefaultTimeout = 10 * time.Second

// runTool runs name with args until ctx's deadline (the probe's; else
// DefaultTimeout) and returns its stdout. Errors are one line naming the
// command: not found, timed out, or its exit status with the last line of
// its stderr.
func runTool(ctx context.Context, name string, args ...string) ([]byte, error) {
	timeout := DefaultTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	display := strings.TrimSpace(name + " " + strings.Join(args, " "))
	path, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("%s: not found", name)
		}
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	res, err := runner.Run(ctx, timeout, path, args...)
	switch {
	case errors.Is(err, runner.ErrTimeout):
		return nil, fmt.Errorf("%s: %w", display, err)
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w", display, ctx.Err())
	case err != nil:
		if l := lastLine(string(res.Stderr)); l != "" {
			return res.Stdout, fmt.Errorf("%s: %v: %s", display, err, l)
		}
		if l := lastLine(string(res.Stdout)); l != "" {
			return res.Stdout, fmt.Errorf("%s: %v: %s", display, err, l)
		}
		return res.Stdout, fmt.Errorf("%s: %v", display, err)
	}
	return res.Stdout, nil
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

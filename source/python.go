package source

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/smpatch/smpatch/internal/runner"
)

// PythonTimeout bounds the one interpreter start PythonSysPath makes when the
// context has no earlier deadline.
var PythonTimeout = 15 * time.Second

// sysPathScript prints sys.path as JSON. It imports nothing beyond json: the
// site module has already put site-packages on sys.path by then.
const sysPathScript = "import sys, json; sys.stdout.write(json.dumps(sys.path))"

// PythonSysPath asks the interpreter python for its sys.path with one isolated
// subprocess (-I: no user site, no PYTHON* variables, no script directory),
// bounded by PythonTimeout. The error names the interpreter.
func PythonSysPath(ctx context.Context, python string) ([]string, error) {
	if python == "" {
		python = "python3"
	}
	res, err := runner.Run(ctx, PythonTimeout, python, "-I", "-c", sysPathScript)
	switch {
	case errors.Is(err, runner.ErrTimeout):
		return nil, fmt.Errorf("python %s: timed out after %s asking for sys.path", python, res.Elapsed.Round(time.Millisecond))
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("python %s: %w", python, ctx.Err())
	case err != nil:
		msg := firstLine(string(res.Stderr))
		if msg == "" {
			msg = err.Error()
		} else {
			msg = err.Error() + ": " + msg
		}
		return nil, fmt.Errorf("python %s: asking for sys.path: %s", python, msg)
	}
	var paths []string
	if err := json.Unmarshal(bytes.TrimSpace(res.Stdout), &paths); err != nil {
		return nil, fmt.Errorf("python %s: sys.path output is not a JSON list of strings: %q", python, clip(string(res.Stdout), 80))
	}
	return paths, nil
}

// SitePackagesDirs keeps the entries of paths that are existing directories
// named site-packages or dist-packages, in order, without duplicates.
func SitePackagesDirs(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		if p == "" {
			continue
		}
		p = filepath.Clean(p)
		base := filepath.Base(p)
		if base != "site-packages" && base != "dist-packages" {
			continue
		}
		if seen[p] {
			continue
		}
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	// Python tracebacks end with the line that matters.
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return clip(l, 200)
		}
	}
	return ""
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"smpatch": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScript runs the command-line stories in testdata/script, one user story
// per file, named by command and behaviour.
func TestScript(t *testing.T) {
	testscript.Run(t, scriptParams("testdata/script", nil))
}

// scriptParams is the one setup of every script directory: a clean
// environment (no catalog, repository, cache or step summary from the
// caller) and the exitcode command; more, when set, adds to the setup.
func scriptParams(dir string, more func(*testscript.Env) error) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Cmds:                map[string]func(ts *testscript.TestScript, neg bool, args []string){"exitcode": cmdExitCode},
		Setup: func(e *testscript.Env) error {
			e.Setenv("SMPATCH_CATALOG", "")
			e.Setenv("SMPATCH_REPO", "")
			e.Setenv("GITHUB_STEP_SUMMARY", "")
			e.Setenv("XDG_CACHE_HOME", e.WorkDir+"/.cache")
			e.Setenv("XDG_CONFIG_HOME", e.WorkDir+"/.config")
			e.Setenv("SMPATCH_PYTHON", "")
			e.Setenv("NO_COLOR", "")
			e.Setenv("XDG_STATE_HOME", e.WorkDir+"/.state")
			// A race-enabled binary sleeps a second at exit by default.
			e.Setenv("GORACE", "atexit_sleep_ms=0")
			if more != nil {
				return more(e)
			}
			return nil
		},
	}
}

// cmdExitCode runs a program like exec and checks its exit code:
// exitcode N PROG ARGS...
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %v", err)
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exitcode: %v", err)
	}
	if got != want {
		ts.Fatalf("exit code %d, want %d", got, want)
	}
}

package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"smpatch": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScript runs the command-line stories in testdata/script, one user story
// per file.
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(e *testscript.Env) error {
			e.Setenv("SMPATCH_CATALOG", "")
			e.Setenv("SMPATCH_REPO", "")
			e.Setenv("XDG_CACHE_HOME", e.WorkDir+"/.cache")
			e.Setenv("XDG_STATE_HOME", e.WorkDir+"/.state")
			// A race-enabled binary sleeps a second at exit by default.
			e.Setenv("GORACE", "atexit_sleep_ms=0")
			return nil
		},
	})
}

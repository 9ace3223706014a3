package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/spf13/cobra"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/smpatch/smpatch/internal/interrupt"
	"github.com/smpatch/smpatch/internal/testkit/synth"
)

// TestMain registers the program, so every script runs smpatch as users
// do, in a process of its own (also under the static build's name).
func TestMain(m *testing.M) {
	main := func() { os.Exit(mainCode()) }
	testscript.Main(m, map[string]func(){
		"smpatch":             main,
		"smpatch-linux-amd64": main,
	})
}

// run executes a command line in process, SIGINT and SIGTERM cancelling
// it as in main, and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	return execute(ctx, args, stdout, stderr)
}

// newRootCmd is the whole command tree.
func newRootCmd(g *Globals, stdout, stderr io.Writer) *cobra.Command {
	return newRoot(g, stdout, stderr)
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
		Cmds:                map[string]func(ts *testscript.TestScript, neg bool, args []string){"exitcode": cmdExitCode, "gitcommit": cmdGitCommit, "synthtree": cmdSynthTree, "mkwheel": cmdMkWheel},
		Setup: func(e *testscript.Env) error {
			e.Setenv("SMPATCH_CATALOG", "")
			e.Setenv("SMPATCH_REPO", "")
			e.Setenv("GITHUB_STEP_SUMMARY", "")
			e.Setenv("XDG_CACHE_HOME", e.WorkDir+"/.cache")
			e.Setenv("XDG_CONFIG_HOME", e.WorkDir+"/.config")
			e.Setenv("SMPATCH_PYTHON", "")
			e.Setenv("PIP_CACHE_DIR", "")
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

// synthtree SHAPE DIR: writes the synthetic sglang tree of an upstream
// shape (testdata/shapes/SHAPE.txtar, through internal/testkit/synth) into
// DIR, so that scripts run on the same fixtures as the engine's tests.
func cmdSynthTree(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: synthtree SHAPE DIR")
	}
	files := synth.SGLangTree(args[0], false)
	if files == nil {
		ts.Fatalf("synthtree: no shape %q (%s)", args[0], strings.Join(synth.Shapes(), ", "))
	}
	dir := ts.MkAbs(args[1])
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		ts.Check(os.MkdirAll(filepath.Dir(p), 0o755))
		ts.Check(os.WriteFile(p, data, 0o644))
	}
	ts.Check(os.WriteFile(filepath.Join(dir, "python", "sglang", "__init__.py"), nil, 0o644))
}

// gitcommit DIR [TAG]: commits every file of DIR (a git repository is
// made there first when it has none) and, given TAG, tags the commit;
// through go-git, as a user's git would leave it.
func cmdGitCommit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: gitcommit DIR [TAG]")
	}
	dir := ts.MkAbs(args[0])
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.PlainInit(dir, false)
	}
	ts.Check(err)
	wt, err := repo.Worktree()
	ts.Check(err)
	ts.Check(wt.AddWithOptions(&git.AddOptions{All: true}))
	sig := &object.Signature{Name: "Dev", Email: "dev@example.org", When: time.Unix(1767225600, 0)}
	h, err := wt.Commit("commit", &git.CommitOptions{Author: sig, AllowEmptyCommits: true})
	ts.Check(err)
	if len(args) == 2 {
		_, err := repo.CreateTag(args[1], h, nil)
		ts.Check(err)
	}
}

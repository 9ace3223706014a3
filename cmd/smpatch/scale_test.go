package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// needService returns the value of variable, which scripts/services.sh env
// sets while the service runs. Without it the test is skipped, loudly, or
// fails when $SMPATCH_REQUIRE_SERVICES is 1 (CI).
func needService(t testing.TB, what, variable string) string {
	t.Helper()
	if v := os.Getenv(variable); v != "" {
		return v
	}
	msg := "SKIP (no " + what + "): $" + variable + " is not set; run scripts/services.sh up, then eval \"$(scripts/services.sh env)\""
	if os.Getenv("SMPATCH_REQUIRE_SERVICES") == "1" {
		t.Fatal("SMPATCH_REQUIRE_SERVICES=1 but " + msg)
	}
	t.Skip(msg)
	return ""
}

// copyTree copies the directory src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	})
}

// scaleScripts runs the stories in dir with the fake sglang server on PATH,
// the story's matrix in story/ and a copy of the sample sglang tree in
// sglang/ of each script's work directory; env is set for every script.
func scaleScripts(t *testing.T, dir string, env map[string]string) {
	bin := buildFakeServer(t)
	story, err := filepath.Abs("../../examples/fake")
	if err != nil {
		t.Fatal(err)
	}
	sample, err := filepath.Abs("../../examples/sample/sglang")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Setup: func(e *testscript.Env) error {
			// testscript's own bin folder (smpatch) comes first on PATH.
			first, _, _ := strings.Cut(e.Getenv("PATH"), string(os.PathListSeparator))
			e.Setenv("SMPATCH_ONLY_PATH", first)
			e.Setenv("PATH", bin+string(os.PathListSeparator)+e.Getenv("PATH"))
			e.Setenv("SMPATCH_CATALOG", "")
			e.Setenv("SMPATCH_REPO", "")
			e.Setenv("GITHUB_STEP_SUMMARY", "")
			e.Setenv("GORACE", "atexit_sleep_ms=0")
			e.Setenv("XDG_CACHE_HOME", e.WorkDir+"/.cache")
			for k, v := range env {
				e.Setenv(k, v)
			}
			if err := copyTree(story, filepath.Join(e.WorkDir, "story")); err != nil {
				return err
			}
			if err := copyTree(sample, filepath.Join(e.WorkDir, "sglang")); err != nil {
				return err
			}
			return copyTree(sample, filepath.Join(e.WorkDir, "sglang.orig"))
		},
	})
}

// TestSlurmScripts runs testdata/slurm against the real slurmctld and slurmd
// that scripts/services.sh starts (one node, eight GRES GPUs).
func TestSlurmScripts(t *testing.T) {
	conf := needService(t, "slurm", "SMPATCH_TEST_SLURM")
	scaleScripts(t, "testdata/slurm", map[string]string{"SLURM_CONF": conf})
}

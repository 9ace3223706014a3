package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smpatch/smpatch/internal/testkit/treetest"

	"github.com/rogpeppe/go-internal/testscript"
)

// buildFakeServer builds testdata/fakeserver (a stand-in for sglang) into a
// temporary directory and returns the directory.
func buildFakeServer(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "fakeserver"), "../../testdata/fakeserver")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the fake server: %v\n%s", err, out)
	}
	return dir
}

// TestLaunchScripts runs the matrix-run stories in testdata/launch: they need
// the fake sglang server on PATH, which the common script runner lacks.
func TestLaunchScripts(t *testing.T) {
	dir := buildFakeServer(t)
	testscript.Run(t, scriptParams("testdata/launch", func(e *testscript.Env) error {
		e.Setenv("PATH", dir+string(os.PathListSeparator)+e.Getenv("PATH"))
		return nil
	}))
}

const fakeCommunicator = `# A cut-down communicator.py: only the flags the fusion gate reads.
_is_sm90_supported = True
_is_sm100_supported = False


def apply_flashinfer_allreduce_fusion(batch_size):
    return _is_sm90_supported or _is_sm100_supported
`

// fakeFusionSetup writes a small sglang tree, a user catalog with a patch
// standing in for sm120-fusion, and a one-cell matrix whose command is cmd.
func fakeFusionSetup(t *testing.T, cmd string) (tree, cat, matrixFile string) {
	dir := t.TempDir()
	tree, cat = filepath.Join(dir, "tree"), filepath.Join(dir, "cat")
	treetest.Write(t, tree, map[string]string{
		"python/sglang/__init__.py":                "",
		"python/sglang/version.py":                 "__version__ = \"0.5.9\"\n",
		"python/sglang/srt/layers/communicator.py": fakeCommunicator,
	})
	treetest.Write(t, cat, map[string]string{
		"fake-fusion.toml": "name = \"fake-fusion\"\nproject = \"sglang\"\nsummary = \"x\"\n[[variant]]\nversions = \">= 0.5.0\"\ndiffs = [\"fake-fusion/gate.diff\"]\n",
		"fake-fusion/gate.diff": "--- a/python/sglang/srt/layers/communicator.py\n+++ b/python/sglang/srt/layers/communicator.py\n" +
			"@@ -1,3 +1,4 @@\n # A cut-down communicator.py: only the flags the fusion gate reads.\n _is_sm90_supported = True\n _is_sm100_supported = False\n+_is_sm120_supported = True\n",
	})
	matrixFile = filepath.Join(dir, "matrix.toml")
	treetest.Write(t, dir, map[string]string{"matrix.toml": `name = "fake"
project = "sglang"
[axes]
patches = [["fake-fusion"]]
[launch]
command = ` + cmd + `
health = "http://127.0.0.1:30986/health"
bench = ["fakeserver", "bench", "-url", "http://127.0.0.1:30986"]
metric = 'Output token throughput \(tok/s\):\s+([0-9.]+)'
startup_timeout = "1m"
`})
	t.Setenv("PATH", buildFakeServer(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("SMPATCH_REPO", tree)
	t.Setenv("SMPATCH_CATALOG", "")
	t.Setenv("GITHUB_STEP_SUMMARY", "")
	return tree, cat, matrixFile
}

func TestMatrixRunExitCode(t *testing.T) {
	tree, cat, m := fakeFusionSetup(t, `["fakeserver", "-mode", "story", "-delay", "10ms", "--port", "30986"]`)
	var stdout, stderr bytes.Buffer
	code := run([]string{"--catalog", cat, "matrix", "run", m, "--out", t.TempDir()}, &stdout, &stderr)
	if code != exitCellsFailed {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitCellsFailed, &stdout, &stderr)
	}
	if !strings.Contains(stdout.String(), "flashinfer-no-arch") {
		t.Errorf("no triage in\n%s", &stdout)
	}
	if got, _ := os.ReadFile(filepath.Join(tree, "python/sglang/srt/layers/communicator.py")); string(got) != fakeCommunicator {
		t.Errorf("tree not restored:\n%s", got)
	}
}

// A $GITHUB_STEP_SUMMARY that cannot be written is a warning: the exit code
// stays the run's own (6: a cell failed), and the results are written.
func TestMatrixRunUnwritableStepSummary(t *testing.T) {
	_, cat, m := fakeFusionSetup(t, `["fakeserver", "-mode", "story", "-delay", "10ms", "--port", "30986"]`)
	t.Setenv("GITHUB_STEP_SUMMARY", filepath.Join(t.TempDir(), "no-such-dir", "summary.md"))
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"--catalog", cat, "matrix", "run", m, "--out", out}, &stdout, &stderr)
	if code != exitCellsFailed {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitCellsFailed, &stdout, &stderr)
	}
	if !strings.Contains(stderr.String(), "smpatch: warning: step summary: ") {
		t.Errorf("no warning about the step summary:\n%s", &stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "results.md")); err != nil {
		t.Errorf("results.md: %v", err)
	}
}

// Ctrl-C in the middle of a cell: the server and its worker are stopped,
// the patch is reverted, and smpatch exits 130.
func TestMatrixRunInterrupt(t *testing.T) {
	pids := t.TempDir()
	server, worker := filepath.Join(pids, "server.pid"), filepath.Join(pids, "worker.pid")
	tree, cat, m := fakeFusionSetup(t, `["fakeserver", "-mode", "ignore-term", "-delay", "1h", "--port", "30986", "-pidfile", "`+server+`", "-child-pidfile", "`+worker+`"]`)
	comm := filepath.Join(tree, "python/sglang/srt/layers/communicator.py")
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"--catalog", cat, "matrix", "run", m, "--out", t.TempDir(), "--stop-grace", "200ms"}, &stdout, &stderr)
	}()
	for {
		if data, err := os.ReadFile(worker); err == nil && len(data) > 0 {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("run ended (exit %d) before the server started:\n%s%s", code, &stdout, &stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got, _ := os.ReadFile(comm); !bytes.Contains(got, []byte("_is_sm120_supported")) {
		t.Fatal("the tree is not patched while the cell runs")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 130 {
		t.Fatalf("exit %d, want 130\n%s%s", code, &stdout, &stderr)
	}
	if !strings.Contains(stderr.String(), "smpatch: interrupted (SIGINT): patches reverted") {
		t.Errorf("stderr:\n%s", &stderr)
	}
	if got, _ := os.ReadFile(comm); string(got) != fakeCommunicator {
		t.Errorf("tree not restored:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(tree, ".smpatch")); err == nil {
		t.Error("journal left in the tree")
	}
	for _, f := range []string{server, worker} {
		data, _ := os.ReadFile(f)
		pid, _ := strconv.Atoi(string(data))
		if pid > 0 && syscall.Kill(pid, 0) == nil && !zombie(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("%s: process %d left running", filepath.Base(f), pid)
		}
	}
}

func zombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] == "Z"
}

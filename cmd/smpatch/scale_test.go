package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smpatch/smpatch/internal/testkit/treetest"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/smpatch/smpatch/internal/testkit/testsvc"
)

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
		Cmds:                map[string]func(*testscript.TestScript, bool, []string){"exclusive": cmdExclusive, "exitcode": cmdExitCode},
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
			// Other tests run the story's matrix at the same time, on its
			// port: this copy listens on one of its own.
			m := filepath.Join(e.WorkDir, "story", "matrix.toml")
			data, err := os.ReadFile(m)
			if err != nil {
				return err
			}
			if err := os.WriteFile(m, bytes.ReplaceAll(data, []byte("30123"), []byte("30223")), 0o644); err != nil {
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
	conf := testsvc.Need(t, "slurm", "SMPATCH_TEST_SLURM")
	scaleScripts(t, "testdata/slurm", map[string]string{"SLURM_CONF": conf})
}

// Ctrl-C during a Slurm run: smpatch cancels the array (scancel), waits
// until no task runs any more (the node's smpatch reverts the patch on its
// SIGTERM), records nothing for the interrupted cell and exits 130.
func TestSlurmInterrupt(t *testing.T) {
	conf := testsvc.Need(t, "slurm", "SMPATCH_TEST_SLURM")
	bin := buildFakeServer(t)
	dir := t.TempDir()
	sample, _ := filepath.Abs("../../examples/sample/sglang")
	tree := filepath.Join(dir, "sglang")
	if err := copyTree(sample, tree); err != nil {
		t.Fatal(err)
	}
	treetest.Write(t, dir, map[string]string{"m.toml": `name = "slow"
[axes]
patches = [["sm120-fusion"]]
nccl = ["fewchan"]
[launch]
command = ["fakeserver", "-mode", "story", "-delay", "2m", "--tp", "8", "--port", "30991"]
health = "http://127.0.0.1:30991/health"
bench = ["fakeserver", "bench", "-url", "http://127.0.0.1:30991"]
startup_timeout = "5m"
`})
	out := filepath.Join(dir, "out")
	cmd := exec.Command("smpatch", "matrix", "run", filepath.Join(dir, "m.toml"), "--runner", "slurm", "--out", out)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SLURM_CONF="+conf, "SMPATCH_REPO="+tree, "GITHUB_STEP_SUMMARY=", "SMPATCH_CATALOG=")
	var stderr bytes.Buffer
	cmd.Stderr = &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The node's smpatch has applied the patch once the tree has a journal.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(tree, ".smpatch")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the task never patched the tree:\n%s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if got := processExitCode(err); got != 130 {
		t.Fatalf("exit %d, want 130:\n%s", got, stderr.String())
	}
	if !strings.Contains(stderr.String(), "slurm: scancel ") {
		t.Errorf("no scancel:\n%s", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(tree, ".smpatch")); err == nil {
		t.Errorf("the tree still has a journal after the interrupt")
	}
	want, _ := os.ReadFile(filepath.Join(sample, "python/sglang/srt/layers/communicator.py"))
	got, _ := os.ReadFile(filepath.Join(tree, "python/sglang/srt/layers/communicator.py"))
	if !bytes.Equal(got, want) {
		t.Errorf("communicator.py was not reverted")
	}
	if data, _ := os.ReadFile(filepath.Join(out, "results.jsonl")); len(data) != 0 {
		t.Errorf("the interrupted cell was recorded: %s", data)
	}
	if data, _ := os.ReadFile(filepath.Join(out, "results.json")); !bytes.Contains(data, []byte(`"interrupted": true`)) {
		t.Errorf("results.json does not say interrupted:\n%s", data)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func processExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestKubeScripts runs testdata/kube against the real control plane that
// scripts/services.sh starts (etcd, kube-apiserver, controller-manager,
// scheduler) with kwok's simulated node of eight nvidia.com/gpu: pods run
// nothing, kwok moves them through their stages and serves a canned log.
func TestKubeScripts(t *testing.T) {
	kc := testsvc.Need(t, "kubernetes", "SMPATCH_TEST_KUBECONFIG")
	scaleScripts(t, "testdata/kube", map[string]string{"KUBECONFIG": kc})
}

// clusterLocks serialize the scripts that share one cluster's GPUs.
var clusterLocks sync.Map // name -> *sync.Mutex

// cmdExclusive holds the lock NAME until the script ends: exclusive NAME.
// The stories of one cluster run one at a time, so that one's Jobs never
// wait (and run past their deadline) behind another's for the node's GPUs.
func cmdExclusive(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: exclusive NAME")
	}
	m, _ := clusterLocks.LoadOrStore(args[0], &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	ts.Defer(mu.Unlock)
}

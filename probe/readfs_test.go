package probe

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
)

// hostileTree writes a flashinfer wheel fixture to disk with the files a
// hostile tree can hold: a .py linked to /dev/zero, a named pipe, and a
// .py larger than MaxSourceFile.
func hostileTree(t *testing.T) (root, sp string) {
	t.Helper()
	a, err := txtar.ParseFile("testdata/wheel-gate-9-10.txtar")
	if err != nil {
		t.Fatal(err)
	}
	root = t.TempDir()
	for _, f := range a.Files {
		p := filepath.Join(root, f.Name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sp = filepath.Join(root, "lib/python3.12/site-packages")
	jit := filepath.Join(sp, "flashinfer/jit")
	if err := os.Symlink("/dev/zero", filepath.Join(jit, "zero.py")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(jit, "fifo.py"), 0o644); err != nil {
		t.Skipf("no named pipes here: %v", err)
	}
	big := strings.Repeat("# padding line of a generated module\n", MaxSourceFile/37+100)
	if err := os.WriteFile(filepath.Join(jit, "big.py"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, sp
}

// TestProbeHostileFiles checks that the probe reads regular files only,
// each at most MaxSourceFile bytes: a link to /dev/zero, a FIFO and a
// huge .py are each reported unknown with why, and the real gates are
// still read.
func TestProbeHostileFiles(t *testing.T) {
	root, sp := hostileTree(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := Run(ctx, Options{SitePackages: []string{sp}, NoBinaries: true, ProcRoot: root, CUDASearchDir: root, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"zero.py": "not a regular file (a character device)",
		"fifo.py": "not a regular file (a named pipe)",
		"big.py":  "larger than the 4194304 bytes the probe reads of one file",
	} {
		found := false
		for k, v := range r.Unknown {
			if strings.HasSuffix(k, "jit/"+name) && strings.Contains(v, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no unknown saying %q: %v", name, want, r.Unknown)
		}
	}
	if r.FlashInfer == nil || r.FlashInfer.Modules["trtllm_comm"] == nil {
		t.Errorf("the gates beside the hostile files were not read: %+v", r.FlashInfer)
	}
	// Read well within its minute: no timeout is reported.
	if why, ok := r.Unknown["probe.timeout"]; ok {
		t.Errorf("probe.timeout reported for a probe that finished in time: %s", why)
	}
}

// TestProbeTimeoutAndCancel checks that the file reading honours the
// probe's context: a cancelled probe returns its error and no report.
func TestProbeTimeoutAndCancel(t *testing.T) {
	_, sp := hostileTree(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, Options{SitePackages: []string{sp}, NoBinaries: true, Timeout: time.Minute}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled probe: %v", err)
	}
}

// TestReadReportBounds checks that a saved report is read only when it
// is a regular file of bounded size.
func TestReadReportBounds(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	if _, err := ReadReport(fifo); err == nil || !errors.Is(err, ErrNotRegular) {
		t.Errorf("FIFO report: %v", err)
	}
	if _, err := ReadReport("/dev/zero"); err == nil || !errors.Is(err, ErrNotRegular) {
		t.Errorf("/dev/zero report: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, []byte(`{"packages": {}, "x": "`+strings.Repeat("a", MaxReport)+`"}`), 0o644)
	if _, err := ReadReport(big); err == nil || !strings.Contains(err.Error(), "more than the 8388608 bytes a probe report may have") {
		t.Errorf("huge report: %v", err)
	}
}

// TestProbeOneTimeBound checks that --timeout bounds the whole probe: an
// nvidia-smi and an nvcc that hang are cut off when it is reached, each
// named as timed out, the files of the environment are read meanwhile, and
// the probe answers within the bound.
func TestProbeOneTimeBound(t *testing.T) {
	_, sp := hostileTree(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	bin := t.TempDir()
	fakeTool(t, bin, "nvidia-smi", "exec "+sleep+" 600")
	cuda := t.TempDir()
	os.MkdirAll(filepath.Join(cuda, "bin"), 0o755)
	fakeTool(t, filepath.Join(cuda, "bin"), "nvcc", "exec "+sleep+" 600")
	t.Setenv("PATH", bin)
	t.Setenv("CUDA_HOME", cuda)
	const timeout = 700 * time.Millisecond
	start := time.Now()
	r, err := Run(context.Background(), Options{SitePackages: []string{sp}, NoBinaries: true, ProcRoot: t.TempDir(), Timeout: timeout})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took > timeout+time.Second {
		t.Errorf("the probe took %s under --timeout %s", took, timeout)
	}
	if !strings.Contains(r.Unknown["host.gpus"], "timed out") || !strings.Contains(r.Unknown["host.cuda_toolkit.version"], "nvcc --version: timed out") {
		t.Errorf("hung tools not named: %v", r.Unknown)
	}
	if !strings.Contains(r.Unknown["probe.timeout"], "--timeout 700ms reached") {
		t.Errorf("no probe.timeout: %v", r.Unknown)
	}
	if r.FlashInfer == nil || r.FlashInfer.Modules["trtllm_comm"] == nil {
		t.Errorf("the environment was not read while the tools hung: %+v", r.FlashInfer)
	}
}

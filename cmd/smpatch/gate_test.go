package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/internal/requires"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/probe"
)

// savedReport writes a probe report of eight SM 12.0 GPUs with CUDA 13.0
// whose flashinfer gates trtllm_comm at [9, 10].
func savedReport(t *testing.T, majors []int) string {
	t.Helper()
	r := &probe.Report{
		Host: &probe.Host{GPUSource: "nvidia-smi", CUDAToolkit: &probe.CUDAToolkit{Version: "13.0.88", Root: "/usr/local/cuda", VersionFrom: "nvcc --version"}},
		FlashInfer: &probe.FlashInfer{Version: "0.6.16.post4", Root: "/sp/flashinfer", Layout: "wheel", Modules: map[string]*probe.Module{
			"trtllm_comm": {SMMajors: majors, Source: "flashinfer/jit/comm.py:192", Generator: "gen_trtllm_comm_module", Gate: "supported_major_versions", Headers: []string{"trtllm_allreduce.cuh"}},
		}},
	}
	for i := 0; i < 8; i++ {
		r.Host.GPUs = append(r.Host.GPUs, probe.GPU{Index: i, Name: "NVIDIA RTX PRO 6000 Blackwell Server Edition", SM: "12.0"})
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func sm120Patch() *patches.Patch {
	return &patches.Patch{Name: "sm120-fusion", Requires: requires.Set{GPUSMMajor: []int{12}, FlashInferModule: "trtllm_comm", CUDAMin: "12.9"}}
}

func TestCheckArch(t *testing.T) {
	ctx := context.Background()
	// Refused: exit 3, one line per requirement.
	var out bytes.Buffer
	notes, err := checkArch(ctx, &out, archGateOptions{ProbeFile: savedReport(t, []int{9, 10})}, []*patches.Patch{sm120Patch()})
	if codeOf(err) != exitRefused || notes != nil {
		t.Fatalf("err %v (code %d), notes %v; want exit %d", err, codeOf(err), notes, exitRefused)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// The long evidence of the failure sits under its requirement.
	if len(lines) != 4 || lines[1] != "check-arch: sm120-fusion: FAIL flashinfer module trtllm_comm builds for SM 12.x:" ||
		!strings.HasPrefix(lines[2], "      unsupported-gate") {
		t.Fatalf("output:\n%s", out.String())
	}
	// --force: a warning line, and the failure comes back as a journal note.
	out.Reset()
	notes, err = checkArch(ctx, &out, archGateOptions{ProbeFile: savedReport(t, []int{9, 10}), Force: true}, []*patches.Patch{sm120Patch()})
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "trtllm_comm") || !strings.Contains(out.String(), "check-arch: warning: --warn-only") {
		t.Fatalf("force: err %v notes %q output:\n%s", err, notes, out.String())
	}
	// Met: no error, no notes.
	out.Reset()
	notes, err = checkArch(ctx, &out, archGateOptions{ProbeFile: savedReport(t, []int{9, 10, 12})}, []*patches.Patch{sm120Patch()})
	if err != nil || notes != nil || strings.Contains(out.String(), "FAIL") {
		t.Fatalf("met: err %v notes %v output:\n%s", err, notes, out.String())
	}
	// --sm overrides the report's GPUs.
	out.Reset()
	_, err = checkArch(ctx, &out, archGateOptions{ProbeFile: savedReport(t, []int{9, 10, 12}), SM: "9.0"}, []*patches.Patch{sm120Patch()})
	if codeOf(err) != exitRefused || !strings.Contains(out.String(), "FAIL a GPU of SM major 12: --sm 9.0") {
		t.Fatalf("--sm 9.0: %v\n%s", err, out.String())
	}
	// A bad probe file is an ordinary error naming it.
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte("{not json"), 0o644)
	_, err = checkArch(ctx, &out, archGateOptions{ProbeFile: bad}, []*patches.Patch{sm120Patch()})
	if codeOf(err) != exitFailure || !strings.Contains(err.Error(), "bad.json") {
		t.Fatalf("bad file: %v", err)
	}
	// A patch without requirements passes.
	out.Reset()
	if _, err := checkArch(ctx, &out, archGateOptions{ProbeFile: savedReport(t, nil)}, []*patches.Patch{{Name: "plain"}}); err != nil || !strings.Contains(out.String(), "plain: no requirements") {
		t.Fatalf("plain: %v %s", err, out.String())
	}
}

// TestApplyCheckArchExitCode runs apply --check-arch end to end: refused
// with exit 3 and the checkout untouched.
func TestApplyCheckArchExitCode(t *testing.T) {
	t.Setenv("SMPATCH_CATALOG", "")
	t.Setenv("SMPATCH_REPO", "")
	repo := t.TempDir()
	comm := filepath.Join(repo, "python", "sglang", "srt", "layers", "communicator.py")
	os.MkdirAll(filepath.Dir(comm), 0o755)
	os.WriteFile(filepath.Join(repo, "python", "sglang", "__init__.py"), nil, 0o644)
	os.WriteFile(filepath.Join(repo, "python", "sglang", "version.py"), []byte("__version__ = \"0.5.9\"\n"), 0o644)
	before := []byte("_is_sm100_supported = is_cuda() and is_sm100_supported()\n")
	os.WriteFile(comm, before, 0o644)
	var out, errb bytes.Buffer
	code := run([]string{"apply", "sm120-fusion", "--repo", repo, "--check-arch", "--probe-file", savedReport(t, []int{9, 10})}, &out, &errb)
	if code != exitRefused {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitRefused, out.String(), errb.String())
	}
	if got, _ := os.ReadFile(comm); !bytes.Equal(got, before) {
		t.Fatalf("communicator.py changed:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(repo, ".smpatch", "state.json")); err == nil {
		t.Fatal("a journal was written")
	}
}

// TestCheckArchSMMajorBounds pins gpu_sm_major = [12] against --sm on both
// sides: 13.0 (a later major, not a later minor) is refused, 12.0 and 12.1
// (SM 12.x, RTX PRO 6000 and DGX Spark) pass; 11.0 is refused too.
func TestCheckArchSMMajorBounds(t *testing.T) {
	ctx := context.Background()
	p := &patches.Patch{Name: "sm12-only", Requires: requires.Set{GPUSMMajor: []int{12}}}
	report := savedReport(t, []int{9, 10, 12})
	for sm, ok := range map[string]bool{"13.0": false, "11.0": false, "12.0": true, "12.1": true, "sm_121a": true, "sm_130": false} {
		var out bytes.Buffer
		_, err := checkArch(ctx, &out, archGateOptions{ProbeFile: report, SM: sm}, []*patches.Patch{p})
		if ok && err != nil {
			t.Errorf("--sm %s: %v\n%s", sm, err, out.String())
		}
		if !ok && (codeOf(err) != exitRefused || !strings.Contains(out.String(), "FAIL a GPU of SM major 12: --sm "+sm)) {
			t.Errorf("--sm %s: err %v (code %d), want refused\n%s", sm, err, codeOf(err), out.String())
		}
	}
}

// TestApplyCheckArchSM13Refused runs apply --check-arch --sm end to end on a
// patch requiring gpu_sm_major = [12]: --sm 13.0 exits 3 and writes
// nothing; --sm 12.1 applies.
func TestApplyCheckArchSM13Refused(t *testing.T) {
	t.Setenv("SMPATCH_REPO", "")
	dir := t.TempDir()
	cat := filepath.Join(dir, "cat")
	os.MkdirAll(filepath.Join(cat, "demo"), 0o755)
	os.WriteFile(filepath.Join(cat, "demo.toml"), []byte(`name = "demo"
project = "sglang"
summary = "A patch for SM 12.x only"

[requires]
gpu_sm_major = [12]

[[variant]]
name = "v05"
versions = ">= 0.5.0, < 0.6"
diffs = ["demo/gate.diff"]
`), 0o644)
	os.WriteFile(filepath.Join(cat, "demo", "gate.diff"), []byte(`--- a/python/sglang/srt/layers/comm.py
+++ b/python/sglang/srt/layers/comm.py
@@ -1,2 +1,3 @@
 _is_sm100_supported = is_sm100_supported()
+_is_sm120_supported = True
 
`), 0o644)
	t.Setenv("SMPATCH_CATALOG", cat)
	repo := filepath.Join(dir, "tree")
	comm := filepath.Join(repo, "python", "sglang", "srt", "layers", "comm.py")
	os.MkdirAll(filepath.Dir(comm), 0o755)
	os.WriteFile(filepath.Join(repo, "python", "sglang", "__init__.py"), nil, 0o644)
	os.WriteFile(filepath.Join(repo, "python", "sglang", "version.py"), []byte("__version__ = \"0.5.9\"\n"), 0o644)
	before := []byte("_is_sm100_supported = is_sm100_supported()\n\n")
	os.WriteFile(comm, before, 0o644)
	report := savedReport(t, []int{9, 10, 12})

	var out, errb bytes.Buffer
	code := run([]string{"apply", "demo", "--repo", repo, "--check-arch", "--probe-file", report, "--sm", "13.0"}, &out, &errb)
	if code != exitRefused || !strings.Contains(out.String(), "FAIL a GPU of SM major 12: --sm 13.0") {
		t.Fatalf("--sm 13.0: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitRefused, out.String(), errb.String())
	}
	if got, _ := os.ReadFile(comm); !bytes.Equal(got, before) {
		t.Fatalf("comm.py changed:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(repo, ".smpatch", "state.json")); err == nil {
		t.Fatal("a journal was written")
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"apply", "demo", "--repo", repo, "--check-arch", "--probe-file", report, "--sm", "12.1"}, &out, &errb); code != exitOK {
		t.Fatalf("--sm 12.1: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if got, _ := os.ReadFile(comm); bytes.Equal(got, before) {
		t.Fatal("--sm 12.1: comm.py not patched")
	}
}

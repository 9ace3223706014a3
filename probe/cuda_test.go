package probe

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func TestParseNVCCVersion(t *testing.T) {
	for in, want := range map[string]string{
		"nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0.r13.0/compiler.36424714_0\n": "13.0.88",
		"Cuda compilation tools, release 12.9\n": "12.9",
		"garbage":                                "",
	} {
		if got := ParseNVCCVersion([]byte(in)); got != want {
			t.Errorf("ParseNVCCVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseArchList(t *testing.T) {
	got := ParseArchList([]byte("compute_75\ncompute_80\ncompute_120\ncompute_121\nwarning: x\n"))
	if !reflect.DeepEqual(got, []string{"compute_75", "compute_80", "compute_120", "compute_121"}) {
		t.Fatal(got)
	}
}

func TestAtLeast(t *testing.T) {
	for _, tt := range []struct {
		have, min string
		want      bool
	}{{"13.0.88", "12.9", true}, {"12.9", "12.9.0", true}, {"12.8.1", "12.9", false}, {"12.10", "12.9", true}, {"12.9", "12.10", false}} {
		if got, err := AtLeast(tt.have, tt.min); err != nil || got != tt.want {
			t.Errorf("AtLeast(%s, %s) = %v, %v", tt.have, tt.min, got, err)
		}
	}
	if _, err := AtLeast("twelve", "12.9"); err == nil || !strings.Contains(err.Error(), `CUDA "twelve" is not a version`) {
		t.Errorf("AtLeast(twelve): %v", err)
	}
}

func TestNewerToolkitOrder(t *testing.T) {
	dirs := []string{"cuda-12.9", "cuda-local", "cuda-13.0", "cuda-12.10", "cuda-12.9.1"}
	sort.SliceStable(dirs, func(i, j int) bool { return newerToolkit(dirs[i], dirs[j]) })
	if want := []string{"cuda-13.0", "cuda-12.10", "cuda-12.9.1", "cuda-12.9", "cuda-local"}; !reflect.DeepEqual(dirs, want) {
		t.Fatalf("order %v, want %v", dirs, want)
	}
}

func TestProbeCUDA(t *testing.T) {
	t.Setenv("CUDA_PATH", "")
	// version.json wins; the arch list comes from nvcc.
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	os.WriteFile(filepath.Join(root, "version.json"), []byte(`{"cuda": {"name": "CUDA SDK", "version": "12.9.1"}}`), 0o644)
	fakeTool(t, filepath.Join(root, "bin"), "nvcc", `case "$1" in --version) echo "Cuda compilation tools, release 12.9, V12.9.86";; --list-gpu-arch) printf 'compute_90\ncompute_120\n';; esac`)
	t.Setenv("CUDA_HOME", root)
	t.Setenv("PATH", t.TempDir())
	r := newReport()
	tk := probeCUDA(context.Background(), r, t.TempDir())
	if tk == nil || tk.Version != "12.9.1" || tk.VersionFrom != filepath.Join(root, "version.json") || !reflect.DeepEqual(tk.Arches, []string{"compute_90", "compute_120"}) {
		t.Fatalf("got %+v unknown %v", tk, r.Unknown)
	}
	// No version.json: nvcc --version.
	os.Remove(filepath.Join(root, "version.json"))
	tk = probeCUDA(context.Background(), newReport(), "")
	if tk.Version != "12.9.86" || tk.VersionFrom != "nvcc --version" {
		t.Fatalf("nvcc --version: %+v", tk)
	}
	// No nvcc either: CUDA_VERSION in cuda.h.
	os.Remove(filepath.Join(root, "bin", "nvcc"))
	os.MkdirAll(filepath.Join(root, "include"), 0o755)
	os.WriteFile(filepath.Join(root, "include", "cuda.h"), []byte("#ifndef __cuda_cuda_h__\n#define CUDA_VERSION 13000\n"), 0o644)
	r = newReport()
	tk = probeCUDA(context.Background(), r, "")
	if tk.Version != "13.0" || tk.VersionFrom != filepath.Join(root, "include", "cuda.h")+":2" || r.Unknown["host.cuda_toolkit.arches"] == "" {
		t.Fatalf("cuda.h: %+v %v", tk, r.Unknown)
	}
	// Nothing at all.
	t.Setenv("CUDA_HOME", "")
	r = newReport()
	if tk := probeCUDA(context.Background(), r, t.TempDir()); tk != nil || r.Unknown["host.cuda_toolkit"] == "" {
		t.Fatalf("no toolkit: %+v %v", tk, r.Unknown)
	}
	// A CUDA_HOME that names nothing is said to be set, not unset.
	t.Setenv("CUDA_HOME", "/nonexistent/cuda")
	t.Setenv("CUDA_PATH", "")
	r = newReport()
	if tk := probeCUDA(context.Background(), r, t.TempDir()); tk != nil ||
		!strings.Contains(r.Unknown["host.cuda_toolkit"], "CUDA_HOME=/nonexistent/cuda is not a directory, CUDA_PATH unset") {
		t.Fatalf("bad CUDA_HOME: %+v %v", tk, r.Unknown)
	}
	t.Setenv("CUDA_HOME", "")
	// /usr/local/cuda-* newest first.
	search := t.TempDir()
	for _, d := range []string{"cuda-12.9", "cuda-13.0", "cuda-12.10"} {
		os.MkdirAll(filepath.Join(search, d, "include"), 0o755)
	}
	if tk := probeCUDA(context.Background(), newReport(), search); tk == nil || tk.Root != filepath.Join(search, "cuda-13.0") {
		t.Fatalf("search: %+v", tk)
	}
}

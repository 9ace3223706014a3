package probe

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// ncclLike is a library shaped like libnccl.so.2: code, read-only data
// holding NCCL's version string (or not), and a fatbin.
func ncclLike(version string) []byte {
	rodata := []byte("\x00NCCL version mismatch\x00%s: %s\x00")
	if version != "" {
		rodata = append(rodata, "NCCL version "+version+"\x00"...)
	}
	return hostELF(64, 62, 0, 0,
		tSection{name: ".text", data: []byte("NCCL version 9.9.9 in code, not data")},
		tSection{name: ".rodata", data: rodata},
		tSection{name: ".nv_fatbin", data: fatbinContainer(tEntry{kind: KindCubin, arch: 90, flags: fl64Linux, payload: 10})},
	)
}

func sglKernelOps(arches ...uint32) []byte {
	var es []tEntry
	for _, a := range arches {
		es = append(es, tEntry{kind: KindCubin, arch: a, flags: fl64Linux | flA | flLong, hdr: 96, payload: 7})
	}
	return hostELF(64, 62, 0, 0, tSection{name: ".nv_fatbin", data: fatbinContainer(es...)})
}

func TestNCCLVersion(t *testing.T) {
	lib := ncclLike("2.27.3+cuda12.9")
	v, off, err := NCCLVersion(bytes.NewReader(lib), int64(len(lib)))
	if v != "2.27.3+cuda12.9" || err != nil || !bytes.HasPrefix(lib[off:], []byte("NCCL version 2.27.3")) {
		t.Fatalf("got %q at %d, %v", v, off, err)
	}
	lib = ncclLike("")
	if _, _, err := NCCLVersion(bytes.NewReader(lib), int64(len(lib))); err == nil || !strings.Contains(err.Error(), `no "NCCL version" string in .rodata`) {
		t.Errorf("no version: %v", err)
	}
	if _, _, err := NCCLVersion(bytes.NewReader([]byte("not an ELF")), 10); err == nil {
		t.Error("not an ELF: no error")
	}
}

const ptxasHelp = `Usage  : ptxas [options] <ptx file>,...

--gpu-name <gpu name>                               (-arch)
        Specify name of NVIDIA GPU to generate code for. This option also takes virtual
        compute architectures, in which case code generation is suppressed.
        Allowed values for this option:  'compute_100','compute_100a','compute_120',
        'compute_120a','lto_120a','sm_100','sm_100a','sm_101','sm_101a','sm_120',
        'sm_120a','sm_50','sm_75','sm_80','sm_86','sm_89','sm_90','sm_90a'.
        Default value:  'sm_52'.

--input-as-string <PTX string>,...                  (-ias)
        Allowed values for this option:  'sm_999'.
`

func TestParsePTXAS(t *testing.T) {
	if v := ParsePTXASVersion([]byte("ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 12.8, V12.8.93\nBuild cuda_12.8.r12.8/compiler.35583870_0\n")); v != "12.8.93" {
		t.Errorf("version %q", v)
	}
	want := []string{"sm_50", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_101", "sm_101a", "sm_120", "sm_120a"}
	if got := ParsePTXASTargets([]byte(ptxasHelp)); !reflect.DeepEqual(got, want) {
		t.Errorf("targets %v", got)
	}
	if got := ParsePTXASTargets([]byte("--help (-h)\n")); got != nil {
		t.Errorf("no --gpu-name: %v", got)
	}
}

// packagesSite is a site-packages with NCCL (cu12 with its library; cu13,
// in a dist-packages beside it, whose library has no version string),
// triton with a bundled ptxas, sglang-kernel's two common_ops, a
// per-architecture jit-cache and sgl-deep-gemm.
func packagesSite(t *testing.T) string {
	sp := filepath.Join(t.TempDir(), "site-packages")
	files := map[string]string{
		"nvidia_nccl_cu12-2.27.3.dist-info/METADATA":                       "Name: nvidia-nccl-cu12\nVersion: 2.27.3\n",
		"nvidia_nccl_cu12-2.27.3.dist-info/RECORD":                         "nvidia/nccl/include/nccl.h,sha256=x,10\nnvidia/nccl/lib/libnccl.so.2,sha256=y,20\n../../../bin/elsewhere,,\n",
		"nvidia/nccl/lib/libnccl.so.2":                                     string(ncclLike("2.27.3+cuda12.9")),
		"../dist-packages/nvidia_nccl_cu13-2.28.9.dist-info/METADATA":      "Name: nvidia-nccl-cu13\nVersion: 2.28.9\n",
		"../dist-packages/nvidia/nccl/lib/libnccl.so.2":                    string(ncclLike("")),
		"triton-3.5.1.dist-info/METADATA":                                  "Name: triton\nVersion: 3.5.1\n",
		"triton/backends/nvidia/bin/ptxas":                                 "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Cuda compilation tools, release 12.8, V12.8.93'; else cat \"$(dirname \"$0\")/help.txt\"; fi\n",
		"triton/backends/nvidia/bin/help.txt":                              ptxasHelp,
		"sglang_kernel-0.4.6.post1.dist-info/METADATA":                     "Name: sglang-kernel\nVersion: 0.4.6.post1\n",
		"sgl_kernel/sm90/common_ops.abi3.so":                               string(sglKernelOps(90)),
		"sgl_kernel/sm100/common_ops.abi3.so":                              string(sglKernelOps(100, 120)),
		"flashinfer_jit_cache_sm120f-0.7.0+cu130.dist-info/METADATA":       "Name: flashinfer-jit-cache-sm120f\nVersion: 0.7.0+cu130\n",
		"flashinfer_jit_cache_sm120f-0.7.0+cu130.dist-info/RECORD":         "flashinfer_jit_cache_sm120f/jit_cache/trtllm_comm/trtllm_comm.so,,\nflashinfer_jit_cache_sm120f/__init__.py,,\n",
		"flashinfer_jit_cache_sm120f/jit_cache/trtllm_comm/trtllm_comm.so": string(sglKernelOps(120)),
		"sgl_deep_gemm-0.1.5.post3.dist-info/METADATA":                     "Name: sgl-deep-gemm\nVersion: 0.1.5.post3\n",
	}
	for name, data := range files {
		p := filepath.Join(sp, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, "/ptxas") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	return sp
}

func TestPackagesBesideSglang(t *testing.T) {
	sp := packagesSite(t)
	dp := filepath.Join(filepath.Dir(sp), "dist-packages")
	r, err := Run(context.Background(), Options{SitePackages: []string{sp, dp}, ProcRoot: t.TempDir(), SysRoot: t.TempDir(), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Packages["nvidia-nccl-cu12"]; p == nil || p.LibVersion != "2.27.3+cuda12.9" || !strings.HasPrefix(p.LibVersionFrom, sp+"/nvidia/nccl/lib/libnccl.so.2@") {
		t.Errorf("nccl cu12: %+v", p)
	}
	if why := r.Unknown["packages.nvidia-nccl-cu13.lib_version"]; why != dp+`/nvidia/nccl/lib/libnccl.so.2: no "NCCL version" string in .rodata` {
		t.Errorf("nccl cu13: %q", why)
	}
	pt := r.Packages["triton"].PTXAS
	if pt == nil || pt.Version != "12.8.93" || pt.Path != sp+"/triton/backends/nvidia/bin/ptxas" || !strings.Contains(pt.TargetsFrom, "--help") {
		t.Fatalf("ptxas: %+v (%v)", pt, r.Unknown)
	}
	if pt.Targets[len(pt.Targets)-1] != "sm_120a" || strings.Contains(strings.Join(pt.Targets, " "), "sm_121") {
		t.Errorf("ptxas targets: %v", pt.Targets)
	}
	k := r.Packages["sglang-kernel"]
	want := []BinaryArches{
		{Path: sp + "/sgl_kernel/sm100/common_ops.abi3.so", Arches: []string{"sm_100a", "sm_120a"}},
		{Path: sp + "/sgl_kernel/sm90/common_ops.abi3.so", Arches: []string{"sm_90a"}},
	}
	if k == nil || !reflect.DeepEqual(k.Files, want) || !reflect.DeepEqual(k.Arches, []string{"sm_90a", "sm_100a", "sm_120a"}) {
		t.Errorf("sglang-kernel: %+v", k)
	}
	if j := r.Packages["flashinfer-jit-cache-sm120f"]; j == nil || j.Version != "0.7.0+cu130" || !reflect.DeepEqual(j.Arches, []string{"sm_120a"}) {
		t.Errorf("split jit-cache: %+v", j)
	}
	if d := r.Packages["sgl-deep-gemm"]; d == nil || d.Version != "0.1.5.post3" {
		t.Errorf("sgl-deep-gemm: %+v", d)
	}
	// An image's ptxas is found, not run.
	s, err := Static(context.Background(), os.DirFS("/"), []string{sp})
	if err != nil {
		t.Fatal(err)
	}
	if pt := s.Packages["triton"].PTXAS; pt == nil || pt.Version != "" || !strings.Contains(s.Unknown["packages.triton.ptxas.version"], "not run") {
		t.Errorf("image ptxas: %+v %v", pt, s.Unknown)
	}
}

package probe

import (
	"strings"
	"testing"

	"github.com/smpatch/smpatch/internal/requires"
)

func gateReport(t *testing.T, fixture, dir string, gpus string, cuda string) *Report {
	t.Helper()
	r := staticOf(t, fixture, dir)
	r.Host = &Host{GPUSource: "nvidia-smi", Driver: "580.65.06"}
	if gpus != "" {
		g, _, err := ParseGPUQuery([]byte(gpus))
		if err != nil {
			t.Fatal(err)
		}
		r.Host.GPUs = g
	}
	if cuda != "" {
		r.Host.CUDAToolkit = &CUDAToolkit{Version: cuda, Root: "/usr/local/cuda", VersionFrom: "nvcc --version"}
	}
	return r
}

func TestCheckRequirements(t *testing.T) {
	sm120 := requires.Set{GPUSMMajor: []int{12}, FlashInferModule: "trtllm_comm", CUDAMin: "12.9"}
	type want struct {
		ok       bool
		evidence string
	}
	tests := []struct {
		name    string
		r       *Report
		req     requires.Set
		sm      string
		results []want
	}{
		{
			name: "8x SM120 with flashinfer gating [9, 10]",
			r:    gateReport(t, "wheel-gate-9-10.txtar", "lib/python3.12/site-packages", rtx8Query(), "13.0.88"),
			req:  sm120,
			results: []want{
				{true, "GPU 0 NVIDIA RTX PRO 6000 Blackwell Server Edition sm 12.0 (nvidia-smi)"},
				{false, "unsupported-gate (flashinfer 0.6.16.post4 at /lib/python3.12/site-packages/flashinfer): flashinfer/jit/comm.py:19: gen_trtllm_comm_module passes supported_major_versions=[9, 10]"},
				{true, "CUDA 13.0.88 at /usr/local/cuda (nvcc --version)"},
			},
		},
		{
			name: "8x SM120 with flashinfer gating [9, 10, 12]",
			r:    gateReport(t, "wheel-gate-9-10-12.txtar", "lib/python3.12/site-packages", rtx8Query(), "12.8"),
			req:  sm120,
			results: []want{
				{true, "sm 12.0"},
				{true, "supported (flashinfer 0.6.17"},
				{false, "CUDA 12.8 at /usr/local/cuda"},
			},
		},
		{
			name: "H200 asked for SM120",
			r:    gateReport(t, "wheel-gate-9-10-12.txtar", "lib/python3.12/site-packages", h200Query, "13.0.88"),
			req:  sm120,
			results: []want{
				{false, "GPU 0 NVIDIA H200 sm 9.0 (nvidia-smi)"},
				{false, "no GPU to check it for: visible GPUs: GPU 0 NVIDIA H200 sm 9.0"},
				{true, "CUDA 13.0.88"},
			},
		},
		{
			name: "--sm 12.0 on a saved report from elsewhere",
			r:    gateReport(t, "wheel-edited-gate.txtar", "site-packages", h200Query, "13.0.88"),
			req:  sm120,
			sm:   "12.0",
			results: []want{
				{true, "--sm 12.0 (this report's GPUs: GPU 0 NVIDIA H200 sm 9.0)"},
				{false, "unsupported-header"},
				{true, "CUDA 13.0.88"},
			},
		},
		{
			name: "P2P and packages",
			r: func() *Report {
				r := gateReport(t, "wheel-gate-9-10-12.txtar", "lib/python3.12/site-packages", rtx8Query(), "")
				m, _ := ParseP2PMatrix([]byte(rtx8Topo(map[[2]int]bool{{0, 4}: true})), 8)
				r.Host.P2P = m
				return r
			}(),
			req: requires.Set{P2PAll: true, Packages: map[string]string{"flashinfer-python": ">= 0.6.17", "flashinfer-jit-cache": "< 0.6.17", "sglang": ">= 0.5.0"}},
			results: []want{
				{false, "1 of 56 pairs not OK: GPU0→GPU4 NS"},
				{false, "flashinfer-jit-cache 0.6.17+cu130 at /lib/python3.12/site-packages"},
				{true, "flashinfer-python 0.6.17 at /lib/python3.12/site-packages"},
				{false, "sglang not installed in lib/python3.12/site-packages"},
			},
		},
		{
			name: "no GPUs, no toolkit",
			r: func() *Report {
				r := gateReport(t, "wheel-gate-9-10-12.txtar", "lib/python3.12/site-packages", "", "")
				r.unknown("host.gpus", "nvidia-smi: timed out after 10s")
				return r
			}(),
			req: requires.Set{GPUSMMajor: []int{12}, CUDAMin: "12.9", P2PAll: true},
			results: []want{
				{false, "nvidia-smi: timed out after 10s"},
				{false, "no CUDA toolkit in the report"},
				{false, "nvidia-smi: timed out after 10s"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckRequirements(tt.r, tt.req, tt.sm)
			if len(got) != len(tt.results) {
				t.Fatalf("%d findings, want %d: %+v", len(got), len(tt.results), got)
			}
			for i, w := range tt.results {
				if got[i].OK != w.ok || !strings.Contains(got[i].Evidence, w.evidence) {
					t.Errorf("finding %d %q: ok=%v %q; want ok=%v containing %q", i, got[i].Requirement, got[i].OK, got[i].Evidence, w.ok, w.evidence)
				}
				if strings.Contains(got[i].Evidence, "\n") || got[i].Requirement == "" {
					t.Errorf("finding %d is not one line: %+v", i, got[i])
				}
			}
		})
	}
}

func TestCheckTPAndNVLink(t *testing.T) {
	r := &Report{Host: &Host{GPUSource: "nvidia-smi",
		GPUs:   []GPU{{Index: 0, SM: "12.0"}, {Index: 1, SM: "12.0"}},
		NVLink: [][]string{{"X", "NS"}, {"NS", "X"}}}}
	no, yes := false, true
	fs := CheckLaunchRequirements(r, requires.Set{TP: []int{2}, NVLink: &no}, Launch{TP: 2})
	if len(fs) != 2 || !fs[0].OK || !fs[1].OK {
		t.Fatalf("TP 2 on 2 GPUs without NVLink: %+v", fs)
	}
	if fs[0].Evidence != "the launch runs tensor parallel 2" {
		t.Errorf("evidence %q", fs[0].Evidence)
	}
	// Without a launch, tp is not checked: the host's GPUs say nothing
	// about the size a server runs with.
	r8 := &Report{Host: &Host{GPUSource: "nvidia-smi", GPUs: make([]GPU, 8)}}
	if f := CheckRequirements(r8, requires.Set{TP: []int{2}}, "")[0]; f.OK || f.NotChecked == "" || f.Evidence != "" {
		t.Errorf("tp [2] on 8 GPUs, no launch: %+v, want not checked", f)
	}
	if f := CheckLaunchRequirements(r8, requires.Set{TP: []int{2}}, Launch{TP: 8})[0]; f.OK {
		t.Errorf("tp [2] at a TP8 launch passed: %+v", f)
	}
	if fs[1].Evidence != "nvidia-smi topo -p2p n: no NVLink between any of the 2 GPUs" {
		t.Errorf("evidence %q", fs[1].Evidence)
	}
	fs = CheckLaunchRequirements(r, requires.Set{TP: []int{4, 8}, NVLink: &yes}, Launch{TP: 2})
	if fs[0].OK || fs[1].OK || fs[0].Requirement != "tensor parallel [4, 8]" {
		t.Errorf("TP 4/8 and NVLink wanted: %+v", fs)
	}
	r.Host.NVLink = nil
	r.Unknown = map[string]string{"host.nvlink": "nvidia-smi: not found"}
	if fs := CheckRequirements(r, requires.Set{NVLink: &no}, ""); fs[0].OK || fs[0].Evidence != "nvidia-smi: not found" {
		t.Errorf("unknown NVLink passed: %+v", fs)
	}
}

package doctor

import (
	"strings"
	"testing"

	"github.com/smpatch/smpatch/internal/smver"
	"github.com/smpatch/smpatch/probe"
)

func TestRunsOn(t *testing.T) {
	for _, tc := range []struct {
		target, gpu string
		want        bool
	}{
		{"sm_120a", "12.0", true}, {"sm_120a", "12.1", false}, {"sm_121a", "12.1", true},
		{"sm_120f", "12.1", true}, {"sm_120", "12.1", true}, {"sm_121", "12.0", false},
		{"sm_100a", "12.0", false}, {"sm_90", "12.0", false}, {"compute_90", "12.0", true},
		{"compute_120a", "12.1", false}, {"compute_120f", "12.1", true}, {"compute_120f", "13.0", false},
	} {
		ta, _ := smver.ParseArch(tc.target)
		ga, _ := smver.ParseArch(tc.gpu)
		if got := runsOn(ta, ga); got != tc.want {
			t.Errorf("%s on %s: %v, want %v", tc.target, tc.gpu, got, tc.want)
		}
	}
}

func TestHostFacts(t *testing.T) {
	r := pcieHost(2, "12.1", "NVIDIA GB10", map[string]*probe.Package{
		"sglang-kernel": {Version: "0.4.6.post1", Arches: []string{"sm_90a", "sm_120a"}, ArchesFrom: []string{"x"},
			Files: []probe.BinaryArches{{Path: "/sp/sgl_kernel/sm100/common_ops.so", Arches: []string{"sm_120a"}}, {Path: "/sp/sgl_kernel/sm90/common_ops.so", Arches: []string{"sm_90a"}}}},
		"nvidia-nccl-cu13": {Version: "2.28.3", LibVersion: "2.28.9+cuda13.0", LibVersionFrom: "/sp/nvidia/nccl/lib/libnccl.so.2@10"},
		"triton":           {Version: "3.5.1", PTXAS: &probe.PTXAS{Path: "/sp/triton/bin/ptxas", Version: "12.8.93", Targets: []string{"sm_120a"}}},
	})
	one, two := 0, 1
	r.Host.PCIe = &probe.PCIe{From: "/sys/bus/pci/devices",
		GPUs: []probe.PCIGPU{
			{Address: "0000:11:00.0", Index: &one, Link: &probe.Link{CurrentWidth: 16, MaxWidth: 16, CurrentGen: 1, MaxGen: 5}, BAR1Bytes: 256 << 20, BAR1From: "resource"},
			{Address: "0000:21:00.0", Index: &two, Link: &probe.Link{CurrentWidth: 8, MaxWidth: 16, MaxGen: 5, From: "/sys/x"}, BAR1Bytes: 128 << 30},
		},
		Bridges: []probe.Bridge{{Address: "0000:10:01.1", PortType: "root port", ACS: &probe.ACS{Present: true, RedirectsP2P: true, Enabled: []string{"p2p_request_redirect"}, From: "/sys/c"}}},
	}
	yes := true
	r.Host.PCIe.SpansSockets = &yes
	r.Host.IOMMU = &probe.IOMMU{Mode: "translated", Evidence: []string{"amd_iommu=on"}}
	r.Host.NvidiaDriver.RegistryDwords = map[string]string{"ForceP2P": "0x11", "RMPcieP2PType": "1"}
	f := newFacts()
	hostFacts(f, r, "")
	for name, want := range map[string]string{
		"gpu.sm": "12.1", "gpu.capability": "121", "host.p2p.all": "true", "host.nvlink.all": "false",
		"host.pcie.degraded": "true", "host.acs": "redirects", "host.iommu": "translated", "host.numa.span": "true",
		"host.bar1.small": "true", "host.force_p2p": "0x11", "nccl.version": "2.28.9", "triton.ptxas": "12.8.93",
		"pkg.sglang-kernel.loads.sm100": "no", "pkg.sglang-kernel.loads.sm90": "no", "pkg.sglang-kernel.loads": "no",
	} {
		if got := f.first(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if v := f.known["host.pcie.degraded"]; !strings.Contains(v.From, "0000:21:00.0 x8 of x16") {
		t.Errorf("degraded evidence: %q", v.From)
	}
	// Not installed: what is said of the package has no value.
	if v, ok, _ := f.Lookup("pkg.sgl-deep-gemm.loads"); !ok || len(v.Vals) != 0 {
		t.Errorf("pkg of a package not installed: %+v %v", v, ok)
	}
	// An older probe's report says nothing of packages it did not look for.
	old := &probe.Report{Host: &probe.Host{GPUs: []probe.GPU{{SM: "12.0", Name: "G"}}}, Python: &probe.Python{SitePackages: []string{"/sp"}}, Packages: map[string]*probe.Package{}}
	f = newFacts()
	hostFacts(f, old, "")
	if _, ok, why := f.Lookup("pkg.sgl-deep-gemm"); ok || !strings.Contains(why, "older probe") {
		t.Errorf("old report: sgl-deep-gemm known (%v, %q)", ok, why)
	}
	if v, ok, _ := f.Lookup("pkg.torch"); !ok || len(v.Vals) != 0 {
		t.Errorf("old report: torch %+v %v", v, ok)
	}
	if _, ok, _ := f.Lookup("host.acs"); ok {
		t.Error("old report: ACS known")
	}
}

func TestHostFactsWithoutReport(t *testing.T) {
	f := newFacts()
	hostFacts(f, nil, "nvidia-smi not found")
	for _, name := range []string{"gpu.sm", "host.acs", "pkg.torch", "nccl.version"} {
		if _, ok, why := f.Lookup(name); ok || why != "nvidia-smi not found" {
			t.Errorf("%s: known %v, why %q", name, ok, why)
		}
	}
}

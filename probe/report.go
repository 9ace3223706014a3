package probe

import (
	"context"
	"encoding/json"
	"fmt"
)

// Report is everything the probe learned, with the JSON keys docs/probe.md lists
// ("Probe report"). Anything it could not read is absent and explained in
// Unknown, never guessed.
type Report struct {
	Host       *Host                          `json:"host,omitempty"`
	Python     *Python                        `json:"python,omitempty"`
	Packages   map[string]*Package            `json:"packages"`
	FlashInfer *FlashInfer                    `json:"flashinfer,omitempty"`
	Verdicts   map[string]map[string]*Verdict `json:"verdicts"`
	Findings   []Finding                      `json:"findings"`
	// Unknown maps what could not be read ("host.gpus", "cuda_toolkit",
	// "packages.torch.arches") to why.
	Unknown map[string]string `json:"unknown,omitempty"`
}

// Host is the machine: GPUs, driver, CUDA toolkit, P2P topology.
type Host struct {
	GPUs        []GPU        `json:"gpus"`
	Driver      string       `json:"driver,omitempty"`
	CUDAToolkit *CUDAToolkit `json:"cuda_toolkit,omitempty"`
	// P2P is the pairwise P2P read matrix from `nvidia-smi topo -p2p r`
	// ("OK", "NS", "X" …), indexed by GPU index; nil with fewer than two GPUs.
	P2P [][]string `json:"p2p,omitempty"`
	// NVLink is the pairwise NVLink matrix from `nvidia-smi topo -p2p n`
	// ("OK" where two GPUs are linked, "NS" where not); nil with fewer than
	// two GPUs or when it could not be read.
	NVLink [][]string `json:"nvlink,omitempty"`
	// GPUSource says where the GPU list came from ("nvidia-smi", "/proc/driver/nvidia/gpus").
	GPUSource string `json:"gpu_source,omitempty"`
	// PCIe is what /sys says about the NVIDIA GPUs' PCIe links and the
	// bridges above them; nil when /sys could not be read (Unknown
	// "host.pcie" says why).
	PCIe *PCIe `json:"pcie,omitempty"`
	// IOMMU is the IOMMU's state, from /sys and the kernel command line.
	IOMMU *IOMMU `json:"iommu,omitempty"`
	// NvidiaDriver is the nvidia kernel module's version and parameters,
	// from /proc/driver/nvidia; nil when neither could be read.
	NvidiaDriver *NvidiaDriver `json:"nvidia_driver,omitempty"`
}

// PCIe is the PCIe side of the host: every NVIDIA GPU /sys/bus/pci/devices
// lists, every bridge above one, and whether the GPUs span NUMA nodes and
// sockets. Each value names the file it was read from; a value that could
// not be read is absent, with its reason in Report.Unknown under
// "host.pcie.gpus[ADDR].FIELD" or "host.pcie.bridges[ADDR].acs".
type PCIe struct {
	// From is the directory the devices were listed from
	// ("/sys/bus/pci/devices").
	From string `json:"from"`
	// GPUs are the NVIDIA display and 3D controllers (vendor 0x10de,
	// class 0x03xxxx), by PCI address.
	GPUs []PCIGPU `json:"gpus"`
	// Bridges are the PCI bridges above the GPUs (root ports, switch
	// ports), each once, by address.
	Bridges []Bridge `json:"bridges"`
	// NUMANodes are the distinct known NUMA nodes of the GPUs; Sockets the
	// distinct CPU packages of their local CPUs.
	NUMANodes []int `json:"numa_nodes"`
	Sockets   []int `json:"sockets"`
	// SpansNUMA and SpansSockets say whether the GPUs sit on more than one
	// NUMA node / socket; absent when a GPU's is unknown (numa_node -1 in
	// a VM) and the known ones agree.
	SpansNUMA    *bool `json:"spans_numa,omitempty"`
	SpansSockets *bool `json:"spans_sockets,omitempty"`
}

// PCIGPU is one GPU as /sys sees it.
type PCIGPU struct {
	// Address is the PCI address, DOMAIN:BUS:DEV.FN ("0000:17:00.0").
	Address string `json:"address"`
	// Index is the nvidia-smi index of this GPU, when matched; IndexFrom
	// says how ("GPU UUID in /proc/driver/nvidia/gpus/ADDR/information",
	// "nvidia-smi lists GPUs in PCI bus order").
	Index     *int   `json:"index,omitempty"`
	IndexFrom string `json:"index_from,omitempty"`
	// SysfsPath is the device's real directory ("/sys/devices/pci0000:16/
	// 0000:16:01.0/0000:17:00.0"); RootComplex its first element ("pci0000:16").
	SysfsPath   string `json:"sysfs_path"`
	RootComplex string `json:"root_complex,omitempty"`
	// VendorDevice is "10de:2bb1", from the vendor and device files.
	VendorDevice string `json:"vendor_device,omitempty"`
	// Link is the PCIe link, from current_link_speed, current_link_width,
	// max_link_speed and max_link_width in the device's directory.
	Link *Link `json:"link,omitempty"`
	// NUMANode is numa_node; absent when the file says -1 (unknown, as in
	// most VMs) or could not be read.
	NUMANode     *int   `json:"numa_node,omitempty"`
	NUMANodeFrom string `json:"numa_node_from,omitempty"`
	// LocalCPUs is local_cpulist ("0-31,64-95"); Socket the
	// physical_package_id of its first CPU.
	LocalCPUs     string `json:"local_cpulist,omitempty"`
	LocalCPUsFrom string `json:"local_cpulist_from,omitempty"`
	Socket        *int   `json:"socket,omitempty"`
	SocketFrom    string `json:"socket_from,omitempty"`
	// BAR1Bytes is the size of what nvidia-smi calls BAR1 (the
	// framebuffer aperture peers map): the second memory region of the
	// resource file; BAR1From names the file and line ("line 3" where
	// BAR 0 is 64-bit, as on H200).
	BAR1Bytes int64  `json:"bar1_bytes,omitempty"`
	BAR1From  string `json:"bar1_from,omitempty"`
	// IOMMUGroup is the device's IOMMU group number and IOMMUGroupType
	// that group's type ("identity": passthrough; "DMA", "DMA-FQ":
	// translated), from the iommu_group link and /sys/kernel/iommu_groups/N/type.
	IOMMUGroup     *int   `json:"iommu_group,omitempty"`
	IOMMUGroupType string `json:"iommu_group_type,omitempty"`
	// Bridges are the addresses of the bridges above the GPU, nearest
	// first (the root port last); their facts are in PCIe.Bridges.
	Bridges []string `json:"bridges"`
}

// Link is a PCIe link's speed and width, current and maximum. A GPU lowers
// its link speed when idle, so a current speed below the maximum is
// expected at rest; a current width below the maximum is not.
type Link struct {
	// CurrentSpeed and MaxSpeed are as the files say ("32.0 GT/s PCIe");
	// CurrentGen and MaxGen the PCIe generation that speed is (5 for
	// 32 GT/s), 0 when the speed is not one of a generation.
	CurrentSpeed string `json:"current_speed,omitempty"`
	CurrentGen   int    `json:"current_gen,omitempty"`
	CurrentWidth int    `json:"current_width,omitempty"`
	MaxSpeed     string `json:"max_speed,omitempty"`
	MaxGen       int    `json:"max_gen,omitempty"`
	MaxWidth     int    `json:"max_width,omitempty"`
	// From is the directory of the four files.
	From string `json:"from"`
}

// Bridge is one PCI bridge above a GPU.
type Bridge struct {
	Address      string `json:"address"`
	SysfsPath    string `json:"sysfs_path"`
	VendorDevice string `json:"vendor_device,omitempty"`
	// PortType is the PCI Express port type from the PCIe capability
	// ("root port", "switch upstream port", "switch downstream port",
	// ...); absent when the config space could not be read that far.
	PortType string `json:"port_type,omitempty"`
	// GPUs are the addresses of the GPUs below this bridge.
	GPUs []string `json:"gpus"`
	// ACS is the bridge's Access Control Services capability; nil when
	// unknown (Report.Unknown "host.pcie.bridges[ADDR].acs" says why: the
	// extended config space is readable by root only).
	ACS *ACS `json:"acs,omitempty"`
}

// ACS is what the ACS extended capability (ID 0x000D) in a bridge's config
// space says.
type ACS struct {
	// Present is false when the whole extended capability list was read
	// and has no ACS capability: nothing is redirected at this bridge.
	Present bool `json:"present"`
	// From is the config file read; Offset the capability's offset in it.
	From   string `json:"from"`
	Offset int    `json:"offset,omitempty"`
	// Capability and Control are the ACS Capability and Control registers
	// (offsets +4 and +6).
	Capability uint16 `json:"capability"`
	Control    uint16 `json:"control"`
	// Enabled names the control bits set: "source_validation",
	// "translation_blocking", "p2p_request_redirect",
	// "p2p_completion_redirect", "upstream_forwarding",
	// "p2p_egress_control", "direct_translated_p2p".
	Enabled []string `json:"enabled"`
	// RedirectsP2P is true when P2P Request Redirect or P2P Completion
	// Redirect is enabled: peer traffic below this bridge goes up to the
	// root complex (and its IOMMU) instead of across.
	RedirectsP2P bool `json:"redirects_p2p"`
}

// IOMMU is the IOMMU's state and the evidence for it.
type IOMMU struct {
	// Mode is "off" (no IOMMU, or turned off on the command line),
	// "passthrough" (identity mapping for DMA), "translated" (DMA goes
	// through IOMMU page tables; peer traffic too when ACS redirects it),
	// or "unknown".
	Mode string `json:"mode"`
	// Evidence are the facts Mode was derived from, each with its file.
	Evidence []string `json:"evidence"`
	// Devices are the entries of /sys/class/iommu (none: no IOMMU).
	Devices     []string `json:"devices"`
	DevicesFrom string   `json:"devices_from,omitempty"`
	// Groups is the number of entries of /sys/kernel/iommu_groups.
	Groups     *int   `json:"groups,omitempty"`
	GroupsFrom string `json:"groups_from,omitempty"`
	// Cmdline is /proc/cmdline; CmdlineParams its IOMMU and PCI
	// parameters (iommu, iommu.passthrough, iommu.strict, amd_iommu,
	// intel_iommu, pci), as given.
	Cmdline       string            `json:"cmdline,omitempty"`
	CmdlineFrom   string            `json:"cmdline_from,omitempty"`
	CmdlineParams map[string]string `json:"cmdline_params,omitempty"`
}

// NvidiaDriver is the nvidia kernel module as /proc/driver/nvidia shows it.
type NvidiaDriver struct {
	// Version is the module's version ("580.159.04") and VersionLine the
	// first line of /proc/driver/nvidia/version it was read from; Module
	// is "open" or "proprietary" as that line says.
	Version     string `json:"version,omitempty"`
	VersionLine string `json:"version_line,omitempty"`
	Module      string `json:"module,omitempty"`
	VersionFrom string `json:"version_from,omitempty"`
	// Params are /proc/driver/nvidia/params, one "Key: value" a line, as
	// written there (quotes kept: RegistryDwords: "").
	Params     map[string]string `json:"params,omitempty"`
	ParamsFrom string            `json:"params_from,omitempty"`
	// RegistryDwords is Params' RegistryDwords parsed into Key=Value pairs
	// (ForceP2P, RMForceP2PType, RMPcieP2PType, ...); empty when none are set.
	RegistryDwords map[string]string `json:"registry_dwords"`
	// RegistryDwordsPerDevice is RegistryDwordsPerDevice parsed, by the
	// PCI address its "pci=ADDR;" prefix names.
	RegistryDwordsPerDevice map[string]map[string]string `json:"registry_dwords_per_device,omitempty"`
}

// GPU is one visible device.
type GPU struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	UUID      string `json:"uuid,omitempty"`
	SM        string `json:"sm,omitempty"` // "12.0"; empty when unknown
	MemoryMiB int    `json:"memory_mib,omitempty"`
}

// Major is the SM major of the GPU (12 for "12.0"), or -1 when unknown.
func (g GPU) Major() int {
	m, _, ok := parseSM(g.SM)
	if !ok {
		return -1
	}
	return m
}

// CUDAToolkit is the CUDA toolkit found on the machine.
type CUDAToolkit struct {
	Version     string   `json:"version,omitempty"`
	VersionFrom string   `json:"version_from,omitempty"` // "/usr/local/cuda/version.json", "nvcc --version", ".../cuda.h:61"
	Root        string   `json:"root,omitempty"`
	NVCC        string   `json:"nvcc,omitempty"`
	Arches      []string `json:"arches,omitempty"` // nvcc --list-gpu-arch: compute_75 …
}

// Python is the interpreter environment that was read.
type Python struct {
	Executable   string   `json:"executable,omitempty"`
	Version      string   `json:"version,omitempty"`
	SitePackages []string `json:"site_packages"`
}

// Package is one installed distribution.
type Package struct {
	Version  string `json:"version"`
	Location string `json:"location"`
	// CUDA is the CUDA version a torch build targets ("13.0"), from torch/version.py.
	CUDA string `json:"cuda,omitempty"`
	// Arches are the SM targets of the package's binaries: cubins as
	// sm_XY[a|f], PTX as compute_XY[a|f].
	Arches []string `json:"arches,omitempty"`
	// ArchesFrom names the binaries the arches were read from.
	ArchesFrom []string `json:"arches_from,omitempty"`
	// Files are the arches of each binary, for the kernel packages whose
	// loader picks one file by GPU (sgl-kernel's sm90/ and sm100/
	// common_ops): at most 16 files.
	Files []BinaryArches `json:"files,omitempty"`
	// LibVersion is the version the package's library states itself
	// ("2.27.3+cuda12.9" from the "NCCL version" string in libnccl.so.2),
	// with where it was read ("FILE@OFFSET").
	LibVersion     string `json:"lib_version,omitempty"`
	LibVersionFrom string `json:"lib_version_from,omitempty"`
	// PTXAS is the ptxas a triton wheel bundles.
	PTXAS *PTXAS `json:"ptxas,omitempty"`
}

// BinaryArches is the SM targets of one binary.
type BinaryArches struct {
	Path   string   `json:"path"`
	Arches []string `json:"arches"`
}

// PTXAS is a bundled ptxas (triton/backends/nvidia/bin/ptxas).
type PTXAS struct {
	Path string `json:"path"`
	// Version is "12.8.93" from `ptxas --version` ("V12.8.93"); absent on
	// an image (nothing is run there) or when it did not answer.
	Version     string `json:"version,omitempty"`
	VersionFrom string `json:"version_from,omitempty"`
	// Targets are the sm_ values `ptxas --help` allows for --gpu-name
	// ("sm_120a", "sm_121a"...); TargetsFrom says where they came from.
	Targets     []string `json:"targets,omitempty"`
	TargetsFrom string   `json:"targets_from,omitempty"`
}

// FlashInfer is what the static analysis of flashinfer found.
type FlashInfer struct {
	Version     string `json:"version,omitempty"`
	VersionFrom string `json:"version_from,omitempty"`
	Root        string `json:"root"`
	Layout      string `json:"layout"` // "wheel" or "source"
	// Modules maps a JIT module name ("trtllm_comm") to its gate.
	Modules          map[string]*Module `json:"modules"`
	HeaderExclusions []HeaderExclusion  `json:"header_exclusions"`
	// SM12CUDAMin is the CUDA version compilation_context.py requires for
	// SM 12.x ("12.9"), with where it was read.
	SM12CUDAMin     string `json:"sm12_cuda_min,omitempty"`
	SM12CUDAMinFrom string `json:"sm12_cuda_min_from,omitempty"`
	// ArchList is FLASHINFER_CUDA_ARCH_LIST when set: it replaces device detection.
	ArchList string `json:"cuda_arch_list,omitempty"`
}

// Module is one JIT module generator and the majors its gate admits.
type Module struct {
	// SMMajors is supported_major_versions; nil when the generator has no gate.
	SMMajors []int `json:"sm_majors"`
	// Source is "file:line" of the gate, or of the generator when it has none.
	Source string `json:"source"`
	// Generator is the Python function that builds the module.
	Generator string `json:"generator,omitempty"`
	// Gate is "supported_major_versions", "none" (no gate: builds for every
	// target arch), "all" (get_nvcc_flags_list without a list), "explicit"
	// (fixed -gencode flags), or "unresolved".
	Gate string `json:"gate"`
	// Note says what the generator does when there is no plain gate.
	Note string `json:"note,omitempty"`
	// Gates lists every gate when the generator has several (chosen at run time).
	Gates []GateSite `json:"gates,omitempty"`
	// Sources are the .cu files the generator names.
	Sources []string `json:"sources,omitempty"`
	// Headers are the comm headers the module's sources use (file names).
	Headers []string `json:"headers,omitempty"`
	// Explicit lists fixed targets for Gate "explicit" ("sm_100a").
	Explicit []string `json:"explicit,omitempty"`
	// Conditional is set when the fixed targets are chosen by a run-time test.
	Conditional bool `json:"conditional,omitempty"`
}

// GateSite is one supported_major_versions argument.
type GateSite struct {
	SMMajors []int  `json:"sm_majors"`
	Source   string `json:"source"`
}

// HeaderExclusion is a preprocessor condition that compiles a kernel body out
// for some architectures (`__CUDA_ARCH__ < 1200`).
type HeaderExclusion struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Text string `json:"text"`
	// FromMajor is the first SM major the condition excludes (12 for "< 1200").
	FromMajor int `json:"from_major"`
}

// Verdict is whether a module can build working kernels for one GPU major.
type Verdict struct {
	Verdict string   `json:"verdict"` // supported | unsupported-gate | unsupported-header | unknown
	Reasons []string `json:"reasons"`
}

// The verdicts.
const (
	Supported         = "supported"
	UnsupportedGate   = "unsupported-gate"
	UnsupportedHeader = "unsupported-header"
	Unknown           = "unknown"
)

// Finding is one checked requirement with its evidence.
type Finding struct {
	Requirement string `json:"requirement"`
	OK          bool   `json:"ok"`
	Evidence    string `json:"evidence"`
	// NotChecked, when set, says why the requirement was not checked (it
	// then neither passes nor refuses).
	NotChecked string `json:"not_checked,omitempty"`
	// Host marks a requirement on the machine the report was taken on (its
	// CUDA toolkit, P2P between its GPUs) rather than on the GPU meant.
	Host bool `json:"-"`
}

// MaxReport bounds the size of a saved report ReadReport reads; a real
// one is tens of KiB.
const MaxReport = 8 << 20

// ReadReport reads a report saved with `smpatch probe --json -o FILE`.
func ReadReport(path string) (*Report, error) {
	data, err := readBounded(context.Background(), path, "a probe report", MaxReport)
	if err != nil {
		return nil, err
	}
	// Any JSON object would decode into an empty Report, which every
	// requirement check then fails for the wrong reason: ask for at least
	// one of the keys smpatch probe always writes.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%s: not a probe report: %w", path, err)
	}
	if top == nil || (top["packages"] == nil && top["verdicts"] == nil && top["findings"] == nil) {
		return nil, fmt.Errorf("%s: not a probe report: no \"packages\", \"verdicts\" or \"findings\" key (write one with smpatch probe -o FILE)", path)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: not a probe report: %w", path, err)
	}
	if r.Packages == nil {
		r.Packages = map[string]*Package{}
	}
	return &r, nil
}

func (r *Report) unknown(what, why string) {
	if r.Unknown == nil {
		r.Unknown = map[string]string{}
	}
	r.Unknown[what] = why
}

func newReport() *Report {
	return &Report{Packages: map[string]*Package{}, Verdicts: map[string]map[string]*Verdict{}, Findings: []Finding{}}
}

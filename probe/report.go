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

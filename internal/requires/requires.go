// Package requires is the one record of what a patch needs from a machine
// before it is enabled. It is plain data: patches fills it from a catalog
// entry's [requires] table and probe checks it against what the machine
// has, so neither of the two needs to know the other. It must not know
// catalogs, probes or the command line.
package requires

// Set is what a machine must have for a patch to be enabled. Its keys are
// those of a catalog entry's [requires] table and of show --json.
type Set struct {
	GPUSMMajor       []int             `toml:"gpu_sm_major" json:"gpu_sm_major"`           // a visible GPU of one of these majors (or --sm)
	FlashInferModule string            `toml:"flashinfer_module" json:"flashinfer_module"` // its JIT gate must admit the GPU, no header exclusion
	CUDAMin          string            `toml:"cuda_min" json:"cuda_min"`                   // minimum CUDA toolkit version
	P2PAll           bool              `toml:"p2p_all" json:"p2p_all"`                     // P2P reads between every pair of visible GPUs
	Packages         map[string]string `toml:"packages" json:"packages"`                   // dist name -> version constraint
	TP               []int             `toml:"tp" json:"tp"`                               // tensor-parallel sizes the patch is for: enough GPUs for the smallest
	NVLink           *bool             `toml:"nvlink" json:"nvlink"`                       // false: only without NVLink (a PCIe machine); true: only with
}

// Empty reports whether the set requires nothing.
func (r Set) Empty() bool {
	return len(r.GPUSMMajor) == 0 && r.FlashInferModule == "" && r.CUDAMin == "" && !r.P2PAll && len(r.Packages) == 0 &&
		len(r.TP) == 0 && r.NVLink == nil
}

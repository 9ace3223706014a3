// Package requires is the one record of what a patch needs from a machine
// before it is enabled. It is plain data: patches fills it from a catalog
// entry's [requires] table and probe checks it against what the machine
// has, so neither of the two needs to know the other. It must not know
// catalogs, probes or the command line.
package requires

// Set is what a machine must have for a patch to be enabled.
type Set struct {
	GPUSMMajor       []int             // a visible GPU of one of these majors (or --sm)
	FlashInferModule string            // its JIT gate must admit the GPU, no header exclusion
	CUDAMin          string            // minimum CUDA toolkit version
	P2PAll           bool              // P2P reads between every pair of visible GPUs
	Packages         map[string]string // dist name -> version constraint
	TP               []int             // tensor-parallel sizes the patch is for: enough GPUs for the smallest
	NVLink           *bool             // false: only without NVLink (a PCIe machine); true: only with
}

// Empty reports whether the set requires nothing.
func (r Set) Empty() bool {
	return len(r.GPUSMMajor) == 0 && r.FlashInferModule == "" && r.CUDAMin == "" && !r.P2PAll && len(r.Packages) == 0 &&
		len(r.TP) == 0 && r.NVLink == nil
}

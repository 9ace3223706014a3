// Package probe finds out what this machine and its Python environment can
// really run before a patch is enabled: GPUs and driver (nvidia-smi), the
// host's PCIe facts read from /sys and /proc (each GPU's link, NUMA node and
// BAR1, the bridges above it and their ACS, the IOMMU mode, the nvidia
// module's parameters), the CUDA toolkit, installed distributions
// (dist-info; NCCL's own library version, triton's bundled ptxas), what the
// installed flashinfer's JIT gates and headers admit (read statically, never
// imported), and which SM targets binaries carry (a streaming .nv_fatbin
// reader), all within one time bound. The result is a Report;
// CheckRequirements turns a Report and a patch's requirements into one
// Finding per requirement, with evidence. Compute capabilities are read by
// internal/smver, CUDA and driver versions compared with go-version.
//
// It must not know patches or the command line: requirements come in as
// plain data (requires.Set, shared with patches) and findings go out as plain data.
package probe

// Package smver is the one reader of a GPU compute capability ("SM
// version") as people and tools write it: "12.0" and "12.1" (nvidia-smi),
// "12", "120", "9.0a" and "9.0+PTX" (TORCH_CUDA_ARCH_LIST,
// FLASHINFER_CUDA_ARCH_LIST), and compilation targets "sm_120",
// "sm_120a", "sm_121a", "sm_100f", "compute_90" (nvcc, cuobjdump, a
// fatbin). Every package that reads one calls Parse or ParseArch. It
// knows nothing of GPUs, probes or matrices.
package smver

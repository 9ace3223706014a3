// Package smver is the one reader of a GPU compute capability ("SM
// version") as people and tools write it: "12.0" (nvidia-smi), "12",
// "120", "sm_120", "sm120a", "sm_100f". It knows nothing of GPUs,
// probes or matrices; they call it.
package smver

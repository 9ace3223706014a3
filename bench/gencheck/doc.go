// Command gencheck writes the synthetic upstream history behind
// bench/check.bench.sh (package checkhist): a bare repository with a
// flashinfer-shaped tree whose target file (flashinfer/jit/comm.py, about
// 250 KB) changes in a share of N commits (-touch), a commit that breaks the
// patch's hunk and a later one that adopts it, plus a catalog directory with
// the patch. Output is deterministic for a given seed.
package main

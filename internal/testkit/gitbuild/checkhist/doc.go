// Package checkhist writes the synthetic upstream history behind
// bench/check.bench.sh and the range walk's tests: a bare repository with a
// flashinfer-shaped tree whose target file (flashinfer/jit/comm.py) changes
// in a share of the commits (drift above and below the patched function), a
// commit that breaks the patch's hunk and a later one that adopts it, plus a
// catalog directory with the patch. Output is deterministic for a given seed.
//
// Like gitbuild, it is for tests and benchmarks only.
package checkhist

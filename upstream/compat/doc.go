// Package compat answers which flashinfer an sglang release works with, from
// a table generated from both projects' histories (make coverage; the
// generator is upstream.GenerateCompat) and embedded in the binary: the
// flashinfer each sglang release pins (python/pyproject.toml, the
// Dockerfile's jit-cache), whether each flashinfer release builds the fused
// all-reduce (trtllm_comm) for SM12x, and whether the flashinfer names an
// sglang tree imports or calls exist in a flashinfer release, with the
// keywords it passes. Pinned, FusionSM12, Check, Install and Advise are the
// questions; ReadPyprojectPin and PinFromRequires read a pin from a tree.
//
// It must not know git, the command line or how the table was read: it
// reads the table and text handed to it, nothing else.
package compat

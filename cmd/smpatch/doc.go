// Command smpatch applies, reverts and inspects named source patches for
// sglang and flashinfer, and probes what the GPUs and installed libraries
// support. It links only what patching a tree needs (package cli), so it
// starts in about the time of a bare Go program; the commands that need
// upstream history, images, Kubernetes or the matrix runner (check,
// checkout, matrix, image, triage, probe --image) it hands to its
// companion smpatch-full, found beside it or on PATH, which it replaces
// itself with, the command line unchanged.
package main

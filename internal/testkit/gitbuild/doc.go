// Package gitbuild writes git histories straight into a bare repository's
// object store with go-git: no work tree and no git binary. Tests and the
// benchmark generator use it to build upstream-shaped histories (drift,
// conflicts, adoption of a patch, PEP 440 tags) reached through file:// URLs.
//
// It must not be imported by the smpatch binary: it is for tests and
// benchmarks only.
package gitbuild

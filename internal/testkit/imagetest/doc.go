// Package imagetest writes synthetic base images for tests and benchmarks:
// an OCI layout with random, incompressible layers (written streaming, so a
// multi-GB base costs no memory) and a layer holding an installed synthetic
// sglang, plus an upper layer whose whiteout hides one of its files.
//
// It must not be imported by the smpatch binary.
package imagetest

// Package image builds one OCI image per matrix cell without a Docker
// daemon: a base image (registry reference, OCI layout or docker-save
// tarball) plus one small, reproducible layer holding the patched files,
// whiteouts for their stale bytecode and /etc/smpatch/manifest.json, with the
// cell's environment and labels in the config.
//
// FS reads an image's merged filesystem by streaming layers top-down,
// honouring whiteouts, without flattening it; Tree serves a project found
// in it to the same patches.Plan that runs on a checkout. Base.Build appends
// the patch layer (base layers are reused by digest, never re-read), the
// Destination implementations (Layout, Registry) put results in an OCI
// layout or a registry, and MatrixBuild does it for every cell of a matrix.
//
// It must not know the command line or how cells run: patches decide what
// the layer holds (patches.PlanSet), launch runs what image builds.
package image

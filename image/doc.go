// Package image builds images without a Docker daemon: a base image
// (registry reference, OCI layout or docker-save tarball) plus one small,
// reproducible layer holding the patched files, whiteouts for their stale
// bytecode and /etc/smpatch/manifest.json, with the image's environment and
// labels in the config.
//
// Resolve opens what a reference names, picking a multi-platform index's
// image for Remote.Platform (remote.WithPlatform for a registry; linux/amd64
// when none is asked for). FS reads the image's merged filesystem; Tree
// serves a project found in it to the same patches.Plan that runs on a
// checkout. Base.Build appends the patch layer (base layers are reused by
// digest, never re-read), the Destination implementations (Layout,
// Registry, Archive) put results in an OCI layout, a registry or a
// docker-save tarball, and Batch does it for a list of patch sets.
//
// FS keeps an index of its own instead of flattening with
// go-containerregistry's mutate.Extract, for three reasons. Extract streams
// every layer on every call and says of no entry which layer holds it, so a
// file could only be read by streaming the image again, top down; FS
// indexes each layer once, keeps that entry list in the index cache by the
// layer's digest, and reads a file from its own layer, so a build or probe
// on a multi-GB base whose index is cached reads only the layers holding
// the project (bench/image.bench.sh measures both). Extract gives a hard
// link the bytes its target has in the merged image, or none when an upper
// layer removed the target (conda's package cache after `conda clean`); FS
// gives it the bytes the target had in the link's layer, as a container
// runtime does. And where one layer names a path twice, Extract keeps the
// first entry and the runtime the last. Decompression and the whiteout
// rules are go-containerregistry's and the OCI spec's; FuzzFS checks FS
// against mutate.Extract wherever the two mean the same.
//
// What an image claims is bounded before it is read (MaxManifestBytes,
// MaxConfigBytes, MaxLayers, MaxEntries, MaxReadFile), every blob read is
// checked against its digest, a signal (the context) stops every stream,
// and NewTransport bounds each wait on a registry.
//
// It must not know the command line, exit codes, matrices or how images
// run: patches decide what the layer holds (patches.PlanSet), the command
// layer says which patch sets to build, launch runs what image builds.
package image

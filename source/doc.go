// Package source reads the trees smpatch patches: a directory checkout, an
// installed package in site-packages, a git revision read from the object
// store, or an image filesystem. Every tree speaks repository-relative paths
// (python/sglang/srt/...), whatever its layout on disk.
//
// It must not know patches, journals or the command line: it reads and
// writes bytes and says which project and version a tree holds.
package source

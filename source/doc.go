// Package source reads the trees smpatch patches: a directory checkout, an
// installed package in site-packages, or an image filesystem (a git
// revision read from the object store is source/gitrepo's RevisionTree). Every tree speaks repository-relative paths
// (python/sglang/srt/...), whatever its layout on disk.
//
// It must not know patches, journals or the command line: it reads and
// writes bytes and says which project and version a tree holds.
package source

// Package source reads the trees smpatch patches: a directory checkout, an
// installed package in site-packages, or an image filesystem (a git
// revision read from the object store is source/gitrepo's RevisionTree). Every tree speaks repository-relative paths
// (python/sglang/srt/...), whatever its layout on disk.
//
// A checkout's nearest version tag (NearestTag) is read through go-git's
// object store alone (storage/filesystem, its dotgit, plumbing/object):
// this package must not import go-git's Repository API or anything that
// links its transports, so the smpatch that patches a tree starts quickly.
//
// It must not know patches, journals or the command line: it reads and
// writes bytes and says which project and version a tree holds.
package source

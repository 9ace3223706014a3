// Package source reads the trees smpatch patches: a directory checkout, an
// installed package in site-packages, or an image filesystem (a git
// revision read from the object store is source/gitrepo's RevisionTree).
// Every tree speaks repository-relative paths (python/sglang/srt/...),
// whatever its layout on disk.
//
// A checkout whose files name no version takes it from its nearest git tag,
// through the TagReader a program sets (SetTagReader): source/gitrepo's
// reads the repository with go-git in process, smpatch's asks smpatch-full.
// This package must not import go-git (beyond plumbing's hash type), so
// the smpatch that patches a tree starts quickly.
//
// It must not know patches, journals or the command line: it reads and
// writes bytes and says which project and version a tree holds.
package source

// Package source reads the trees smpatch patches: a directory checkout, an
// installed package in site-packages, or an image filesystem (a git
// revision read from the object store is source/gitrepo's RevisionTree).
// Every tree speaks repository-relative paths (python/sglang/srt/...),
// whatever its layout on disk. A tree on disk is reached only through an
// os.Root of its directory, so no read or write leaves it, and no write
// lands in .git or the journal directory (write.go).
//
// An editable install (direct_url.json, a .pth path, a setuptools finder
// module, an egg-link) is followed to its checkout (editable.go), and the
// tree says which pointer led there (ViaOf). ShownPath names a repository
// path as the tree has it, for people.
//
// A checkout whose files name no version takes it from its nearest git tag,
// through the TagReader the program sets (SetTagReader: source/gitrepo's
// reads the repository with go-git). This package must not import go-git
// (beyond plumbing's hash type).
//
// It must not know patches, journals or the command line: it reads and
// writes bytes and says which project and version a tree holds.
package source

// Package catalog is smpatch's catalog of patches: the built-in one,
// embedded from this directory (NAME.toml and the diffs it names), and
// catalog directories of the user's, each file decoded, checked (names,
// projects, paths inside the project, version ranges that parse and do
// not overlap, needs that resolve without a cycle, markers that compile)
// and turned into a Patch with its diffs parsed (package udiff) and its
// digest. docs/catalog.md is the file format.
//
// It must not know trees on disk, plans, journals or the command line:
// what a patch would do to a tree is the engine's (package patches).
package catalog

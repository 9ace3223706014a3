// Package gitrepo reads git repositories with go-git: a commit of upstream
// history as a source.Tree (RevisionTree, with its listing cache and file
// contents read straight from the pack files, delta bases kept per pack
// offset, for walks over many commits), the on-disk cache of upstream
// clones (RepoCache: fetch, resolve, checkout) with the network transports
// and timeouts behind a fetch, and a checkout's nearest version tag
// (NearestTag, set as source's TagReader when this package is linked).
//
// It is apart from package source so that the program that patches a tree
// on disk (smpatch) links no go-git at all: it asks smpatch-full for a
// checkout's tag. It must not know patches, journals or the command line.
package gitrepo

// Package gitrepo reads git repositories with go-git: a commit of upstream
// history as a source.Tree (RevisionTree, with its listing cache, and file
// contents read straight from the pack files behind go-git's object-store
// interface, delta bases kept per pack offset in a bounded LRU, for walks
// over many commits), the on-disk cache of upstream clones (RepoCache:
// fetch, resolve, checkout) with the network transports and timeouts behind
// a fetch, and a checkout's nearest version tag (NearestTag, the program's
// source.TagReader).
//
// Every file of a repository it reads before go-git does (.git, commondir,
// alternates, HEAD and refs) is read bounded and refused when it is not a
// regular file. It must not know patches, journals or the command line.
package gitrepo

// Package gitrepo reads git repositories through go-git's full repository
// API: a commit of upstream history as a source.Tree (RevisionTree, with its
// blob and listing cache), the on-disk cache of upstream clones (RepoCache:
// fetch, resolve, checkout) and the network transports and timeouts behind
// a fetch.
//
// It is apart from package source so that the commands that patch a tree
// on disk never link go-git's transports: source reads a checkout's version
// through go-git's object store alone. It must not know patches, journals or
// the command line.
package gitrepo

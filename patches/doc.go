// Package patches is smpatch's engine: the Plan that resolves a catalog
// patch (package catalog) against a source.Tree, hunk by hunk (package
// udiff), with the variant chosen and why; the Set of patches planned
// together, each on the result of those before it (PlanSet); and Apply,
// Revert and Status on writable trees, written and read under the tree's
// journal (package journal).
//
// A variant is taken only when its hunks resolve and its result meets the
// patch's verify rules (the version's variant first, then the others by
// content); a hunk whose change the tree already has in another spelling is
// recognised by the rule that proves it (equivalent.go); a patch past its
// [upstream] merged_in with its marker is retired on that tree.
//
// A Set is a list of patches planned on one tree; Set.Problem says in one
// line why a set does not apply; Apply recovers the journal once and
// writes the set. The same Set serves every consumer: apply writes it, the
// matrix runner applies it before a cell, image builds put its bytes into
// a layer; check only classifies single plans.
//
// It must not know the command line, the probe or the matrix: what a
// caller may do with a Set (write it to disk, into an image layer, before
// a cell runs) is the caller's; whether a set applies and why not is only
// ever decided here (PlanSet, Set.Problem, Apply). It returns typed errors
// (*ConflictError, *RevertRefusedError, the journal's) and decides no exit
// code. The catalog's and udiff's types that a Plan is made of are named
// here too (api.go), for its callers.
package patches

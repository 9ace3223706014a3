// Package patches holds smpatch's patch model: the catalog of named patches
// (TOML plus unified diffs, embedded and from directories), the unified-diff
// parser, the Plan that matches every hunk against a source.Tree, and the
// journaled apply, revert and status on writable trees.
//
// A Set is a list of patches planned on one tree, each on the result of
// those before it (PlanSet); Set.Problem says in one line why a set does
// not apply; Apply recovers the journal once and writes the set. The same
// Set serves every consumer: apply writes it, the matrix runner applies it
// before a cell, image builds put its bytes into a layer; check only
// classifies single plans.
//
// It must not know the command line, the probe or the matrix: what a
// caller may do with a Set (write it to disk, into an image layer, before
// a cell runs) is the caller's; whether a set applies and why not is only
// ever decided here (PlanSet, Set.Problem, Apply).
package patches

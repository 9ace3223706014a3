// Package udiff is smpatch's unified diff: parsing a diff into its files
// and hunks (Parse), writing one back out (FileDiff.Format), making one
// from two texts (Hunks, Unified), and matching a file diff against a
// file's bytes (Match): every hunk exact, at an offset, placed by
// similarity under the fuzz policy (match.go), already applied, or in
// conflict, and the bytes the file has once every hunk is in.
//
// It must not know catalogs, plans, trees, journals or the command line: it
// turns bytes and diffs into bytes, hunk by hunk.
package udiff

// Package upstream checks catalog patches against upstream revisions read
// with go-git: for every patch one status (applies, fuzzy, already-upstream,
// conflict, no-variant), and over a range of history the first commit where
// that status changed. Reports come out as text, JSON, JUnit XML or GitHub
// annotations. The main types are Target, Result and RangeResult.
//
// It also makes the compatibility table package compat embeds
// (GenerateCompat): it reads sglang's and flashinfer's histories, each
// revision's pin, flashinfer's JIT gate and headers through probe's reader,
// and the flashinfer names an sglang tree uses, read from its Python text
// (ReadPyUses) and resolved in each flashinfer tree, never imported or run.
//
// It must not know the command line or how reports are printed for a
// terminal beyond the formats it writes: CheckUpstream and CheckCheckout
// are the faces the check command calls.
package upstream

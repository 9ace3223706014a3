package patches

import (
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/patches/udiff"
)

// The catalog's types (package catalog), under the names the engine's
// callers use.
type (
	Catalog    = catalog.Catalog
	Patch      = catalog.Patch
	Variant    = catalog.Variant
	Upstream   = catalog.Upstream
	Uncovered  = catalog.Uncovered
	VerifyRule = catalog.VerifyRule
)

// The types of package udiff that a Plan is made of, under the names the
// engine's callers use.
type (
	FileDiff   = udiff.FileDiff
	Hunk       = udiff.Hunk
	HunkStatus = udiff.HunkStatus
	HunkResult = udiff.HunkResult
	Region     = udiff.Region
)

// How a hunk resolved (udiff.HunkStatus).
const (
	Exact          = udiff.Exact
	Offset         = udiff.Offset
	Fuzzy          = udiff.Fuzzy
	AlreadyApplied = udiff.AlreadyApplied
	Conflict       = udiff.Conflict
)

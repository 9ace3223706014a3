package patches

import (
	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/requires"
	"github.com/smpatch/smpatch/source"
)

// Patch is one catalog entry: NAME.toml and the diffs it names.
type Patch struct {
	Name    string
	Project source.Project
	Summary string
	Links   []string

	// Origin is "builtin" or the catalog directory the patch came from.
	Origin string
	// File is the TOML file the patch was read from (for error messages).
	File string
	// Overrides is set when a user patch replaces a built-in of the same name.
	Overrides bool

	// Upstream describes where the change stands upstream (optional).
	Upstream Upstream
	// Requires is what --check-arch verifies before the patch is applied.
	Requires requires.Set
	// Variants are tried by the tree's version; ranges never overlap.
	Variants []*Variant
	// Verify are post-conditions checked on the written files.
	Verify []VerifyRule
	// Uncovered names upstream shapes the patch knows it cannot handle.
	Uncovered []string
	// Digest is the sha256 of the patch's TOML and diff files.
	Digest string
}

// Upstream says where a patch stands in its upstream project.
type Upstream struct {
	Status     string // "proposed", "merged", "rejected", "local"
	PR         string // forwarded pull request URL
	MergedIn   string // first upstream version that carries the change
	Marker     string // text whose presence in a target file shows the change is upstream
	MarkerFile string
}

// Variant is one version range of a patch and the diffs for it.
type Variant struct {
	// Name is a short label ("c4-s3"); defaults to the range.
	Name        string
	Versions    string // the constraint as written
	Constraints version.Constraints
	Diffs       []string    // catalog-relative diff files
	Files       []*FileDiff // parsed, in order
	// Search lists repository-relative directories where a target file that
	// is missing at its path is looked for by anchor (the first hunk), for
	// code that moved to another file ("search = [...]" in a [[variant]]).
	Search []string
}

// VerifyRule is a post-condition on a written file.
type VerifyRule struct {
	File        string // repository-relative
	Contains    string
	NotContains string
}

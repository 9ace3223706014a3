package patches

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"regexp"

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
	// Uncovered names upstream shapes the patch knows it cannot handle;
	// those with a marker are recognised on a tree no variant fits.
	Uncovered []Uncovered
	// Needs names patches that must be in place first: applied on the
	// tree, or earlier in the same set ("needs = [...]").
	Needs []string
	// needed are the patches Needs names, resolved when the catalog loads.
	needed []*Patch
	// needsLine finds the line of "needs" in the patch's file, for errors.
	needsLine func() int
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

// Uncovered is an upstream shape a patch knows it does not cover. An entry
// written as a plain string is a note (Text) and is never detected; a
// [[uncovered]] table has a name, the window of upstream history it spans,
// why it is not covered, and a marker (File plus Contains or Regex) that
// recognises it on a tree.
type Uncovered struct {
	Name     string
	Window   string
	Why      string
	Text     string // a plain-string entry
	File     string // marker: repository-relative file
	Contains string // marker: text the file contains
	Regex    string // marker: a regular expression the file matches
}

// String is the entry for people: "NAME (WINDOW): WHY", or the note.
func (u Uncovered) String() string {
	if u.Name == "" {
		return u.Text
	}
	s := u.Name
	if u.Window != "" {
		s += " (" + u.Window + ")"
	}
	if u.Why != "" {
		s += ": " + u.Why
	}
	return s
}

// Detectable reports whether the entry has a marker.
func (u Uncovered) Detectable() bool { return u.File != "" }

// uncoveredShape is the first detectable uncovered shape whose marker t
// has, or nil.
func (p *Patch) uncoveredShape(t source.Tree) (*Uncovered, error) {
	for i := range p.Uncovered {
		u := &p.Uncovered[i]
		if !u.Detectable() {
			continue
		}
		b, err := t.ReadFile(u.File)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		switch {
		case u.Contains != "" && bytes.Contains(b, []byte(u.Contains)):
			return u, nil
		case u.Regex != "":
			re, err := regexp.Compile(u.Regex)
			if err != nil {
				return nil, fmt.Errorf("%s: uncovered %s: %w", p.File, u.Name, err)
			}
			if re.Match(b) {
				return u, nil
			}
		}
	}
	return nil, nil
}

// admits reports whether the tree version v is in the variant's range,
// read from its text without go-version (the built-in catalog's variants
// have no parsed Constraints); a version that is not PEP 440 is checked
// through go-version.
func (c *Variant) admits(v *version.Version) bool {
	if c.Versions == "" {
		return true
	}
	if ok, err := source.SatisfiesText(c.Versions, v); err == nil {
		return ok
	}
	cs, err := source.ParseConstraints(c.Versions)
	return err == nil && source.Satisfies(cs, v)
}

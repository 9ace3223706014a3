package catalog

import (
	"fmt"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/requires"
	"github.com/smpatch/smpatch/patches/udiff"
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
	// needsLine finds the line of "needs" in the patch's file, for errors;
	// nameLine and orderLine those of "name" and "order".
	needsLine, nameLine, orderLine, upstreamLine func() int
	// Order is the patch's place in its directory's series when the
	// directory orders its patches by `order` keys (0: none).
	Order int
	// Digest is the sha256 of the patch's TOML and diff files.
	Digest string
}

// Upstream says where a patch stands in its upstream project.
type Upstream struct {
	// Status is one of UpstreamStatuses: local (never proposed), open (a
	// pull request is open; "proposed" is the older word), closed (closed
	// without merging; "rejected"), merged; "" when not said.
	Status     string
	PR         string // the pull request URL
	Link       string // another URL: the upstream commit, issue or discussion
	MergedIn   string // the first upstream version, or the commit, that carries the change
	Marker     string // text whose presence in a target file shows the change is upstream
	MarkerFile string
	// MarkerFiles are more files the marker is looked for in, after
	// MarkerFile (upstream code that moved between releases).
	MarkerFiles []string
	// Source, Author and SHA256 say where a patch made by smpatch new or
	// import came from (see the upstreamFile keys); its link is Link.
	Source, Author, SHA256 string
	// Clone is the local git repository the variants' base commits were
	// read from, for a three-way merge on conflict.
	Clone string
}

// Variant is one version range of a patch and the diffs for it.
type Variant struct {
	// Name is a short label ("c4-s3"); defaults to the range.
	Name        string
	Versions    string // the constraint as written
	Constraints version.Constraints
	Diffs       []string          // catalog-relative diff files
	Files       []*udiff.FileDiff // parsed, in order
	// Search lists repository-relative directories where a target file that
	// is missing at its path is looked for by anchor (the first hunk), for
	// code that moved to another file ("search = [...]" in a [[variant]]).
	Search []string
	// Predicted, when set, says why the variant is not measured: no tree
	// of the versions it is for was reachable when it was written (it was
	// read from single files of later revisions, say).
	Predicted string
	// Base is the revision the diffs were made against, when known.
	Base string
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

// Admits reports whether the tree version v is in the variant's range
// (every version when it has none). A variant loaded from a catalog has
// its range parsed (Constraints); one made by hand may have only the text.
func (c *Variant) Admits(v *version.Version) bool {
	if c.Versions == "" {
		return true
	}
	cs := c.Constraints
	if cs == nil {
		var err error
		if cs, err = source.ParseConstraints(c.Versions); err != nil {
			return false
		}
	}
	return source.Satisfies(cs, v)
}

// MergedInCommit reports whether MergedIn names a commit (hex digits)
// rather than a version.
func (u Upstream) MergedInCommit() bool {
	return u.MergedIn != "" && commitRE().MatchString(u.MergedIn)
}

// IsMerged reports whether the catalog says upstream took the change.
func (u Upstream) IsMerged() bool { return u.Status == "merged" }

// UpstreamAt is where the patch's [upstream] table is: its file and the
// table's line (0 when it has none).
func (p *Patch) UpstreamAt() (string, int) {
	if p.upstreamLine == nil {
		return p.File, 0
	}
	return p.File, p.upstreamLine()
}

// nameAt is where the patch's name is: "FILE:LINE".
func (p *Patch) nameAt() string {
	if p.nameLine != nil {
		if n := p.nameLine(); n > 0 {
			return fmt.Sprintf("%s:%d", p.File, n)
		}
	}
	return p.File
}

// Needed is every patch p needs, directly or through another, each after
// the patches it needs itself.
func (p *Patch) Needed() []*Patch {
	var out []*Patch
	seen := map[*Patch]bool{p: true}
	var walk func(q *Patch)
	walk = func(q *Patch) {
		for _, r := range q.needed {
			if seen[r] {
				continue
			}
			seen[r] = true
			walk(r)
			out = append(out, r)
		}
	}
	walk(p)
	return out
}

// NeedsPatches are the patches Needs names, in its order, resolved when
// the catalog loaded.
func (p *Patch) NeedsPatches() []*Patch { return p.needed }

package catalog

import (
	"fmt"

	"github.com/smpatch/smpatch/internal/requires"
)

// The shapes of a catalog file (NAME.toml) as the TOML decoder fills them;
// the loader (load.go) checks them and derives a Patch.

// patchFile is one NAME.toml.
type patchFile struct {
	Name      string          `toml:"name"`
	Project   string          `toml:"project"`
	Summary   string          `toml:"summary"`
	Links     []string        `toml:"links"`
	Overrides bool            `toml:"overrides"`
	Order     int64           `toml:"order"`
	Uncovered []uncoveredFile `toml:"uncovered"`
	Needs     []string        `toml:"needs"`
	Requires  requiresFile    `toml:"requires"`
	Upstream  upstreamFile    `toml:"upstream"`
	Variant   []variantFile   `toml:"variant"`
	Verify    []verifyFile    `toml:"verify"`
}

// requiresFile is [requires]: the record itself, and p2p, which says what
// p2p_all says.
type requiresFile struct {
	requires.Set
	P2P *bool `toml:"p2p"`
}

// upstreamFile is [upstream].
type upstreamFile struct {
	Status     string `toml:"status"`
	PR         string `toml:"pr"`
	Link       string `toml:"link"`
	MergedIn   string `toml:"merged_in"`
	Marker     string `toml:"marker"`
	MarkerFile string `toml:"marker_file"`
	// MarkerFiles are more files the marker may be in (code that moved).
	MarkerFiles []string `toml:"marker_files"`
	// Where a patch made by smpatch new or import came from: "tree",
	// "git", "file" or "url"; the commit's author (its link is Link); the
	// sha256 of the fetched or read content.
	Source string `toml:"source"`
	Author string `toml:"author"`
	SHA256 string `toml:"sha256"`
	// Clone is the local repository the base commits were read from.
	Clone string `toml:"clone"`
}

// variantFile is one [[variant]].
type variantFile struct {
	Name      string   `toml:"name"`
	Versions  string   `toml:"versions"`
	Diffs     []string `toml:"diffs"`
	Search    []string `toml:"search"`
	Predicted string   `toml:"predicted"`
	// Base is the revision the variant's diff was made against (a commit,
	// or "wheel NAME sha256:..."), for a three-way result on conflict.
	Base string `toml:"base"`
}

// uncoveredFile is one entry of "uncovered": a plain string (a note,
// Text) or a [[uncovered]] table (Table: name, window, why and a marker,
// file plus contains or regex), whose keys the loader checks.
type uncoveredFile struct {
	Text  string
	Table map[string]any
}

// UnmarshalTOML takes either form.
func (u *uncoveredFile) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		u.Text = v
	case map[string]any:
		u.Table = v
	default:
		return fmt.Errorf("uncovered: each entry is a string or a table, not %T", v)
	}
	return nil
}

// verifyFile is one [[verify]].
type verifyFile struct {
	File        string `toml:"file"`
	What        string `toml:"what"`
	When        string `toml:"when"`
	Contains    string `toml:"contains"`
	NotContains string `toml:"not_contains"`
	Regex       string `toml:"regex"`
	NotRegex    string `toml:"not_regex"`
}

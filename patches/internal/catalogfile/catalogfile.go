// Package catalogfile holds the shapes of a catalog file (NAME.toml) as the
// TOML decoder fills them, and the decoding itself. The catalog loader
// checks and derives a patch from a Patch; the built-in catalog's Patch
// values are decoded once, when they are generated (gen), rather than by
// every process.
package catalogfile

import (
	"fmt"

	"github.com/BurntSushi/toml"

	"github.com/smpatch/smpatch/internal/requires"
	"github.com/smpatch/smpatch/internal/tomlfile"
)

// Patch is one NAME.toml.
type Patch struct {
	Name      string      `toml:"name"`
	Project   string      `toml:"project"`
	Summary   string      `toml:"summary"`
	Links     []string    `toml:"links"`
	Overrides bool        `toml:"overrides"`
	Uncovered []Uncovered `toml:"uncovered"`
	Needs     []string    `toml:"needs"`
	Requires  Requires    `toml:"requires"`
	Upstream  Upstream    `toml:"upstream"`
	Variant   []Variant   `toml:"variant"`
	Verify    []Verify    `toml:"verify"`
}

// Requires is [requires]: the record itself, and p2p, which says what
// p2p_all says.
type Requires struct {
	requires.Set
	P2P *bool `toml:"p2p"`
}

// Upstream is [upstream].
type Upstream struct {
	Status     string `toml:"status"`
	PR         string `toml:"pr"`
	MergedIn   string `toml:"merged_in"`
	Marker     string `toml:"marker"`
	MarkerFile string `toml:"marker_file"`
}

// Variant is one [[variant]].
type Variant struct {
	Name     string   `toml:"name"`
	Versions string   `toml:"versions"`
	Diffs    []string `toml:"diffs"`
	Search   []string `toml:"search"`
}

// Uncovered is one entry of "uncovered": a plain string (a note, Text) or
// a [[uncovered]] table (Table: name, window, why and a marker, file plus
// contains or regex), whose keys the loader checks.
type Uncovered struct {
	Text  string
	Table map[string]any
}

// UnmarshalTOML takes either form.
func (u *Uncovered) UnmarshalTOML(v any) error {
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

// Verify is one [[verify]].
type Verify struct {
	File        string `toml:"file"`
	Contains    string `toml:"contains"`
	NotContains string `toml:"not_contains"`
}

// Decode decodes data, the text of file, refusing a key Patch has no place
// for; lineOf places such a key for the error ("file:line: unknown key").
func Decode(file string, data []byte, lineOf func(toml.Key) int) (Patch, error) {
	var pf Patch
	md, err := tomlfile.Decode(file, data, &pf)
	if err != nil {
		return Patch{}, err
	}
	if err := tomlfile.UnknownError(file, md, nil, lineOf); err != nil {
		return Patch{}, err
	}
	return pf, nil
}

// Decoded is a NAME.toml decoded ahead of time: the Patch Decode returned
// for Text, and the digest of the patch loaded from Text and its diffs as
// they were then.
type Decoded struct {
	Text   string
	Patch  Patch
	Digest string
}

package author

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
)

// NewOptions steer New.
type NewOptions struct {
	Name string
	Into string // the catalog directory
	// Base is the revision of a checkout the change is measured against
	// (HEAD when ""); Wheel the wheel of a site-packages tree.
	Base, Wheel string
	// Versions is the variant's range (default ">= " the tree's version).
	Versions    string
	Summary     string
	ToolVersion string
	Waiting     func(line string)
}

// Result says what New, Import or Refresh wrote.
type Result struct {
	Name     string   `json:"name"`
	TOML     string   `json:"toml"`
	Diffs    []string `json:"diffs"`
	Variant  string   `json:"variant"`
	Versions string   `json:"versions"`
	Pristine string   `json:"pristine"`
	Version  string   `json:"version"`
	// VersionNote says why the variant has no range (the version is
	// unknown).
	VersionNote string   `json:"version_note,omitempty"`
	Files       []string `json:"files"`
	Skipped     []string `json:"skipped"`
	// Narrowed says which older variant's range was cut at this one.
	Narrowed string `json:"narrowed,omitempty"`
	// Replaced: refresh --replace replaced the diffs of the variant named.
	Replaced bool `json:"replaced,omitempty"`
	// Recorded: the tree's journal now has the patch applied.
	Recorded bool `json:"recorded"`
	// Note says what refresh found ("applies exactly: nothing to write").
	Note    string        `json:"note,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// PristineOf is the pristine source of t: a checkout's commit, a
// site-packages tree's wheel. An image tree has none yet.
func PristineOf(t source.WritableTree, base, wheel string) (*Pristine, error) {
	switch t.Kind() {
	case source.KindCheckout:
		if wheel != "" {
			return nil, inputf("--wheel is for a site-packages tree; %s is a checkout (--base REV)", t.Root())
		}
		return GitPristine(t, base)
	case source.KindSitePackages:
		if base != "" {
			return nil, inputf("--base is for a checkout; %s is site-packages (--wheel FILE)", t.Root())
		}
		return WheelPristine(t, wheel)
	}
	return nil, inputf("%s: a %s tree: smpatch new reads checkouts (against a commit) and site-packages (against the wheel)", t.Root(), t.Kind())
}

// New makes the change of tree t against its pristine source a catalog
// entry NAME (NAME.toml and NAME/VARIANT.diff in opts.Into), then records
// t as having NAME applied, so that status and revert work at once.
// Nothing is written when any step fails.
func New(ctx context.Context, t source.WritableTree, opts NewOptions) (*Result, error) {
	start := time.Now()
	if !catalog.ValidName(opts.Name) {
		return nil, inputf("%q: a patch name is lower-case letters, digits, '.', '_' and '-'", opts.Name)
	}
	if builtinName(opts.Name) {
		return nil, inputf("%q is the name of a built-in patch: choose another", opts.Name)
	}
	ver, from := versionOf(ctx, t)
	vr, err := rangeOf(ver, from, opts.Versions, "the tree")
	if err != nil {
		return nil, err
	}
	pr, err := PristineOf(t, opts.Base, opts.Wheel)
	if err != nil {
		return nil, err
	}
	d, err := Compare(ctx, t, pr, nil)
	if err != nil {
		return nil, err
	}
	if len(d.Changes) == 0 {
		return nil, inputf("%s: no change against %s: nothing to make a patch of", t.Root(), pr.Desc)
	}
	summary := opts.Summary
	if summary == "" {
		summary = "Local change to " + changedList(t, d.Changes)
	}
	m := Meta{Summary: summary, Source: "tree", Clone: pr.Clone, Comment: []string{
		fmt.Sprintf("%s: made by smpatch new from %s against %s.", opts.Name, t.Root(), pr.Desc),
	}}
	res, e, wrote, p, err := writeEntry(opts.Into, opts.Name, t.Project(), vr, pr.Base, d, m, func(rel string) string { return source.ShownPath(t, rel) })
	if err != nil {
		return nil, err
	}
	if err := recordApplied(ctx, t, p, d, e, wrote, opts.ToolVersion, opts.Waiting); err != nil {
		return nil, err
	}
	res.Recorded = true
	res.Pristine = pr.Desc
	res.Elapsed = time.Since(start)
	return res, nil
}

// writeEntry writes a new entry from d's changes; shown names a
// repository path for people (nil: as it is).
func writeEntry(into, name string, project source.Project, vr *verRange, base string, d *Diffed, m Meta, shown func(string) string) (*Result, *Entry, []string, *catalog.Patch, error) {
	diff := MakeDiff(d.Changes)
	src := filepath.Join(into, diffName(name, vr.Name))
	if err := checkDiff(src, diff, d.Changes); err != nil {
		return nil, nil, nil, nil, err
	}
	e, err := newEntry(into, name, project, vr, base, diff, m)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	p, err := e.Load()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	wrote, err := e.Write(true)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	res := &Result{Name: name, TOML: filepath.Join(into, name+".toml"), Variant: p.Variants[0].Name, Versions: p.Variants[0].Versions, Version: vr.Ver, VersionNote: vr.Note, Skipped: d.Skipped}
	for k := range e.Diffs {
		res.Diffs = append(res.Diffs, filepath.Join(into, k))
	}
	for _, c := range d.Changes {
		if shown != nil {
			res.Files = append(res.Files, shown(c.Path))
		} else {
			res.Files = append(res.Files, c.Path)
		}
	}
	return res, e, wrote, p, nil
}

// record records the tree as having p applied with d's originals; a
// failure removes the entry e again (its files wrote).
func recordApplied(ctx context.Context, t source.WritableTree, p *catalog.Patch, d *Diffed, e *Entry, wrote []string, tool string, waiting func(string)) error {
	if _, err := patches.Adopt(ctx, t, p, p.Variants[0].Name, d.Originals(), patches.ApplyOptions{ToolVersion: tool, Waiting: waiting}); err != nil {
		if e != nil {
			e.remove(wrote)
		}
		return err
	}
	return nil
}

func builtinName(name string) bool {
	ps, err := catalog.LoadFS(catalog.Builtin(), "patches/catalog", catalog.BuiltinOrigin)
	if err != nil {
		return false
	}
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// treeVersion is t's version as PEP 440 text, "" when unknown.
func treeVersion(ctx context.Context, t source.Tree) string {
	v, _, err := t.Version(ctx)
	if err != nil || v == nil {
		return ""
	}
	return source.VersionString(v)
}

func changedList(t source.Tree, cs []Change) string {
	var names []string
	for _, c := range cs {
		names = append(names, filepath.Base(c.Path))
	}
	if len(names) > 3 {
		names = append(names[:3], fmt.Sprintf("and %d more", len(names)-3))
	}
	return strings.Join(names, ", ")
}

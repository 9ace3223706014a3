package patches

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// StatusResult is what status shows for one tree.
type StatusResult struct {
	Tree        string `json:"tree"`
	Kind        string `json:"kind"`
	Project     string `json:"project"`
	Version     string `json:"version"`
	VersionFrom string `json:"version_from"`
	// Interrupted lists the entries a killed apply or revert left in
	// flight, each with what finishes it: status writes nothing, the next
	// writing command finishes them.
	Interrupted []*journal.Interrupted `json:"interrupted"`
	Patches     []*PatchStatus         `json:"patches"`
}

// PatchStatus is one applied patch.
type PatchStatus struct {
	Name          string    `json:"name"`
	Variant       string    `json:"variant"`
	VariantReason string    `json:"variant_reason"`
	AppliedAt     time.Time `json:"applied_at"`
	ToolVersion   string    `json:"tool_version"`
	Origin        string    `json:"origin"`
	PatchDigest   string    `json:"patch_digest"`
	CatalogDigest string    `json:"catalog_digest"`
	// CatalogChanged is set when the catalog's patch of this name differs
	// from the one applied (or is gone).
	CatalogChanged bool     `json:"catalog_changed"`
	Notes          []string `json:"notes"`
	// Unfinished is set for the entry apply --merge or --reject records:
	// the patch is in the tree only in part, left to finish by hand.
	Unfinished bool          `json:"unfinished"`
	Files      []*FileStatus `json:"files"`
	// Clean is true when every file still has the patched bytes.
	Clean bool `json:"clean"`
	// Damaged says what is wrong with the journal's copies of this
	// patch's original bytes ("" when they are all there and match the
	// hashes recorded): a revert would refuse.
	Damaged string `json:"damaged"`
}

// FileStatus is one file of an applied patch: "patched" (as written),
// "changed" (edited since apply), "original" (reverted by hand), "missing",
// or what stands at its path instead of a regular file ("replaced by a
// symlink", "not a regular file: fifo"; nothing is read through it).
type FileStatus struct {
	Path  string `json:"path"`
	State string `json:"state"`
	// Under names the patches applied after this one that changed the
	// file again, when its bytes are theirs on top of this patch's (a
	// series of patches to one file): the file is still patched.
	Under []string `json:"under,omitempty"`
}

// Status reads the journal of t and compares every journaled file with
// the bytes written. It writes nothing (journal.Read): entries a killed
// command left in flight are reported, not finished. cat may be nil.
func Status(ctx context.Context, t source.WritableTree, cat *Catalog, opts journal.Options) (*StatusResult, error) {
	j, err := journal.Read(ctx, t, opts)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	res := &StatusResult{Tree: t.Root(), Kind: string(t.Kind()), Project: string(t.Project()), Patches: []*PatchStatus{}}
	if res.Interrupted, err = j.Interrupted(); err != nil {
		return nil, err
	}
	if res.Interrupted == nil {
		res.Interrupted = []*journal.Interrupted{}
	}
	v, from, err := t.Version(ctx)
	if err == nil {
		if v != nil {
			res.Version = source.VersionString(v)
		}
		res.VersionFrom = from
	}
	applied := []*journal.Entry{}
	for _, e := range j.State().Patches {
		if e.State == journal.Applied {
			applied = append(applied, e)
		}
	}
	for i, e := range applied {
		ps, err := patchStatus(t, j, cat, e, applied[i+1:])
		if err != nil {
			return nil, err
		}
		res.Patches = append(res.Patches, ps)
	}
	return res, nil
}

// FinishNote starts the note of the journal entry apply --merge or
// --reject records: the patch is in the tree only in part.
const FinishNote = "left to finish by hand"

// patchStatus is the status of the applied entry e.
func patchStatus(t source.WritableTree, j *journal.Journal, cat *Catalog, e *journal.Entry, later []*journal.Entry) (*PatchStatus, error) {
	ps := &PatchStatus{
		Name: e.Name, Variant: e.Variant, VariantReason: e.VariantReason, AppliedAt: e.AppliedAt,
		ToolVersion: e.ToolVersion, Origin: e.Origin, PatchDigest: e.PatchDigest,
		CatalogDigest: e.CatalogDigest, Notes: e.Notes, Clean: true, Files: []*FileStatus{},
		Damaged: j.Damage(e),
	}
	if ps.Damaged != "" {
		ps.Clean = false
	}
	ps.Unfinished = slices.ContainsFunc(e.Notes, func(n string) bool { return strings.HasPrefix(n, FinishNote) })
	if ps.Notes == nil {
		ps.Notes = []string{}
	}
	if cat != nil {
		p, ok := cat.Lookup(e.Name)
		ps.CatalogChanged = !ok || p.Digest != e.PatchDigest
	}
	for _, f := range e.Files {
		h, other, err := journal.Look(t, f.Path) // "" when the file is missing
		if err != nil {
			return nil, err
		}
		fs := &FileStatus{Path: f.Path}
		top, under := Stacked(f.Path, f.Patched, later)
		switch {
		case other != "":
			fs.State = other // a symlink, a named pipe, a directory: read nothing through it
		case h == f.Patched:
			fs.State = "patched"
		case len(under) > 0 && h == top:
			fs.State, fs.Under = "patched", under
			fs.State = "patched"
		case h == "":
			fs.State = "missing"
		case h == f.Original:
			fs.State = "original"
		default:
			fs.State = "changed"
		}
		if fs.State != "patched" {
			ps.Clean = false
		}
		ps.Files = append(ps.Files, fs)
	}
	return ps, nil
}

// Stacked follows a file through the entries applied after one whose
// result for it hashed patched: each later entry that found exactly those
// bytes and patched them again. It returns the hash the last of them left
// and their names (none: patched itself).
func Stacked(path, patched string, later []*journal.Entry) (string, []string) {
	var names []string
	for _, g := range later {
		for _, gf := range g.Files {
			if gf.Path == path && gf.Original == patched {
				patched = gf.Patched
				names = append(names, g.Name)
			}
		}
	}
	return patched, names
}

// UpstreamMarker reports whether t already carries the patch's change
// upstream: the [upstream] marker text is in marker_file, or in one of
// marker_files; where says FILE:LINE, the file as the tree shows it. It is
// false when the patch declares no marker or no marker file has it.
func UpstreamMarker(t source.Tree, p *Patch) (bool, string) {
	u := p.Upstream
	if u.Marker == "" || u.MarkerFile == "" {
		return false, ""
	}
	for _, f := range append([]string{u.MarkerFile}, u.MarkerFiles...) {
		b, err := t.ReadFile(f)
		if err != nil {
			continue
		}
		i := bytes.Index(b, []byte(u.Marker))
		if i < 0 {
			continue
		}
		return true, fmt.Sprintf("%s:%d", source.ShownPath(t, f), 1+bytes.Count(b[:i], []byte("\n")))
	}
	return false, ""
}

// ReadState returns the journal of t after finishing any entry left in
// flight, as every writing command does before it plans (the matrix runner
// reads it so before its first cell). A tree without a journal has an
// empty state and is not touched.
func ReadState(ctx context.Context, t source.WritableTree) (*journal.State, error) {
	ok, err := journal.Exists(t)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &journal.State{Tree: t.Root(), Kind: string(t.Kind())}, nil
	}
	j, err := journal.Open(ctx, t, journal.Options{})
	if err != nil {
		return nil, err
	}
	defer j.Close()
	if _, err := j.Recover(); err != nil {
		return nil, err
	}
	return j.State(), nil
}

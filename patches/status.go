package patches

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/smpatch/smpatch/source"
)

// StatusResult is what status shows for one tree.
type StatusResult struct {
	Tree        string `json:"tree"`
	Kind        string `json:"kind"`
	Project     string `json:"project"`
	Version     string `json:"version"`
	VersionFrom string `json:"version_from"`
	// Recovered lists entries left in flight that were rolled back or
	// finished before reading.
	Recovered []string       `json:"recovered"`
	Patches   []*PatchStatus `json:"patches"`
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
	CatalogChanged bool          `json:"catalog_changed"`
	Notes          []string      `json:"notes"`
	Files          []*FileStatus `json:"files"`
	// Clean is true when every file still has the patched bytes.
	Clean bool `json:"clean"`
	// Damaged says what is wrong with the journal's copies of this
	// patch's original bytes ("" when they are all there and match the
	// hashes recorded): a revert would refuse.
	Damaged string `json:"damaged"`
}

// FileStatus is one file of an applied patch: "patched" (as written),
// "changed" (edited since apply), "original" (reverted by hand), "missing".
type FileStatus struct {
	Path  string `json:"path"`
	State string `json:"state"`
}

// Status reads the journal of t (finishing anything left in flight) and
// compares every journaled file with the bytes written. cat may be nil.
func Status(ctx context.Context, t source.WritableTree, cat *Catalog) (*StatusResult, error) {
	st, damaged, err := readStateChecked(ctx, t)
	if err != nil {
		return nil, err
	}
	res := &StatusResult{Tree: t.Root(), Kind: string(t.Kind()), Project: string(t.Project()), Recovered: st.Recovered, Patches: []*PatchStatus{}}
	if res.Recovered == nil {
		res.Recovered = []string{}
	}
	v, from, err := t.Version(ctx)
	if err == nil {
		if v != nil {
			res.Version = source.VersionString(v)
		}
		res.VersionFrom = from
	}
	for _, e := range st.Patches {
		ps := &PatchStatus{
			Name: e.Name, Variant: e.Variant, VariantReason: e.VariantReason, AppliedAt: e.AppliedAt,
			ToolVersion: e.ToolVersion, Origin: e.Origin, PatchDigest: e.PatchDigest,
			CatalogDigest: e.CatalogDigest, Notes: e.Notes, Clean: true, Files: []*FileStatus{},
			Damaged: damaged[e.Name],
		}
		if ps.Damaged != "" {
			ps.Clean = false
		}
		if ps.Notes == nil {
			ps.Notes = []string{}
		}
		if cat != nil {
			p, err := cat.Get(e.Name)
			ps.CatalogChanged = err != nil || p.Digest != e.PatchDigest
		}
		for _, f := range e.Files {
			h, err := hashCurrent(t, f.Path) // "" when the file is missing
			if err != nil {
				return nil, err
			}
			fs := &FileStatus{Path: f.Path}
			switch {
			case h == f.Patched:
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
		res.Patches = append(res.Patches, ps)
	}
	return res, nil
}

// UpstreamMarker reports whether t already carries the patch's change
// upstream: the [upstream] marker text is in marker_file. It is false when
// the patch declares no marker or the file is absent.
func UpstreamMarker(t source.Tree, p *Patch) (bool, string) {
	u := p.Upstream
	if u.Marker == "" || u.MarkerFile == "" {
		return false, ""
	}
	b, err := t.ReadFile(u.MarkerFile)
	if err != nil || !bytes.Contains(b, []byte(u.Marker)) {
		return false, ""
	}
	line := 1 + bytes.Count(b[:bytes.Index(b, []byte(u.Marker))], []byte("\n"))
	return true, fmt.Sprintf("%s:%d", u.MarkerFile, line)
}

// readStateChecked is ReadState that also checks, for every entry, the
// journal's copies of the original bytes: entry name → what is wrong.
func readStateChecked(ctx context.Context, t source.WritableTree) (*State, map[string]string, error) {
	damaged := map[string]string{}
	if ok, err := lstatStateDir(t.StateDir()); err != nil || !ok {
		if err != nil {
			return nil, nil, err
		}
		return &State{Format: stateFormat, Tree: t.Root(), Kind: string(t.Kind())}, damaged, nil
	}
	if _, err := os.Lstat(filepath.Join(t.StateDir(), journalStateJSON)); errors.Is(err, fs.ErrNotExist) {
		return &State{Format: stateFormat, Tree: t.Root(), Kind: string(t.Kind())}, damaged, nil
	}
	j, err := openJournal(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	defer j.close()
	if _, err := j.recover(); err != nil {
		return nil, nil, err
	}
	for _, e := range j.state.Patches {
		if d := j.copyState(e); d != "" {
			damaged[e.Name] = d
		}
	}
	return j.state, damaged, nil
}

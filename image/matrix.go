package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/matrix"
	"github.com/smpatch/smpatch/patches"
)

// Cell statuses in a matrix build.
const (
	StatusBuilt   = "built"
	StatusSkipped = "skipped" // the same digest is already at the destination
	StatusFailed  = "failed"
	StatusPruned  = "pruned" // a rule pruned the cell; nothing is built
)

// CellOutcome is what happened to one cell of a matrix build. Its JSON
// keys are stable.
type CellOutcome struct {
	ID       string   `json:"id"`
	Status   string   `json:"status"`
	Patches  []string `json:"patches"`
	Ref      string   `json:"ref,omitempty"`
	Digest   string   `json:"digest,omitempty"`
	PatchSet string   `json:"patch_set,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Code     int      `json:"exit_code,omitempty"` // for a failed cell: 4 conflict, 1 other
}

// MatrixBuild builds one image per runnable cell on one base.
type MatrixBuild struct {
	Base    *Base
	Dest    Destination
	Resolve func(name string) (*patches.Patch, error) // catalog lookup
	Options BuildOptions
	Labels  map[string]string // added to every image
	// Progress, when set, is told about each cell as it finishes.
	Progress func(CellOutcome)
}

// Run builds every cell. A failing cell does not stop the others; pruned
// cells are reported and not built.
func (mb *MatrixBuild) Run(ctx context.Context, cells []*matrix.Cell) []CellOutcome {
	out := make([]CellOutcome, 0, len(cells))
	if a, ok := mb.Dest.(*Archive); ok {
		// One archive file holds every cell: written once, at the end.
		a.Begin()
		defer func() {
			if err := a.Flush(); err != nil {
				for i := range out {
					if out[i].Status == StatusBuilt {
						out[i].Status, out[i].Ref, out[i].Reason, out[i].Code = StatusFailed, "", err.Error(), exit.Failure
					}
				}
			}
		}()
	}
	for _, c := range cells {
		o := mb.one(ctx, c)
		if mb.Progress != nil {
			mb.Progress(o)
		}
		out = append(out, o)
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

func (mb *MatrixBuild) one(ctx context.Context, c *matrix.Cell) CellOutcome {
	o := CellOutcome{ID: c.ID, Patches: append([]string{}, c.Patches...)}
	if c.Pruned != nil {
		o.Status = StatusPruned
		o.Reason = fmt.Sprintf("%s: %s", c.Pruned.Rule, c.Pruned.Reason)
		return o
	}
	fail := func(err error) CellOutcome {
		o.Status, o.Reason, o.Code = StatusFailed, err.Error(), exit.Code(err)
		return o
	}
	var ps []*patches.Patch
	for _, n := range c.Patches {
		p, err := mb.Resolve(n)
		if err != nil {
			return fail(err)
		}
		ps = append(ps, p)
	}
	res, err := mb.Base.Build(ctx, Cell{ID: c.ID, Patches: ps, Env: c.Env, Labels: mb.Labels}, mb.Options)
	if err != nil {
		return fail(err)
	}
	b := res.Built
	o.Digest, o.PatchSet = b.Digest.String(), b.Manifest.PatchSet
	if ref, ok, err := mb.Dest.Has(ctx, c.ID, b.Digest); err != nil {
		return fail(err)
	} else if ok {
		o.Status, o.Ref = StatusSkipped, ref
		return o
	}
	ref, err := mb.Dest.Put(ctx, c.ID, b.Image)
	if err != nil {
		return fail(err)
	}
	o.Status, o.Ref = StatusBuilt, ref
	return o
}

// ExitError summarises a matrix build: nil when every cell built (or was
// skipped or pruned); else exit code 4 when a cell's patch conflicts, 1 for
// other failures.
func ExitError(outs []CellOutcome) error {
	failed, conflict := 0, false
	for _, o := range outs {
		if o.Status == StatusFailed {
			failed++
			conflict = conflict || o.Code == exit.Conflict
		}
	}
	if failed == 0 {
		return nil
	}
	code := exit.Failure
	if conflict {
		code = exit.Conflict
	}
	return exit.With(code, fmt.Errorf("%d of %d cells failed", failed, len(outs)))
}

// WriteRefs records each built or skipped cell's reference (cell id ->
// "repo@sha256:...") in the JSON refs file that `matrix render --refs`
// reads. Cells of an earlier build not in outs are kept when keep says the
// matrix still has them (keep nil: all); the file is replaced atomically.
func WriteRefs(path string, outs []CellOutcome, keep func(id string) bool) (map[string]string, error) {
	refs := map[string]string{}
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &refs); err != nil {
			return nil, fmt.Errorf("%s: not a refs file: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	for id := range refs {
		if keep != nil && !keep(id) {
			delete(refs, id)
		}
	}
	for _, o := range outs {
		if o.Ref != "" {
			refs[o.ID] = o.Ref
		} else {
			delete(refs, o.ID) // failed or pruned now: an old image would mislead
		}
	}
	data, err := json.MarshalIndent(refs, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := renameio.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return refs, nil
}

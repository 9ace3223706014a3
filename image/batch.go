package image

import (
	"context"

	"github.com/smpatch/smpatch/patches"
)

// Statuses of an image in a batch.
const (
	StatusBuilt   = "built"
	StatusSkipped = "skipped" // the same digest is already at the destination
	StatusFailed  = "failed"
)

// PatchSet is one image of a batch: its id (the image's name at the
// destination), the names of its patches, applied in order, and its env.
type PatchSet struct {
	ID      string
	Patches []string
	Env     map[string]string
}

// Outcome is what became of one patch set of a batch.
type Outcome struct {
	ID       string
	Status   string // StatusBuilt, StatusSkipped or StatusFailed
	Ref      string // the image at the destination
	Digest   string
	PatchSet string // the manifest's patch_set
	Err      error  // why it failed
}

// Batch builds one image per patch set on one base, into one destination.
type Batch struct {
	Base    *Base
	Dest    Destination
	Resolve func(name string) (*patches.Patch, error) // catalog lookup
	Options BuildOptions
	Labels  map[string]string // added to every image
	// Progress, when set, is told about each patch set as it finishes.
	Progress func(Outcome)
}

// Run builds every patch set, in order. One that fails does not stop the
// others; a done ctx does, after the set being built.
func (b *Batch) Run(ctx context.Context, sets []PatchSet) []Outcome {
	out := make([]Outcome, 0, len(sets))
	if a, ok := b.Dest.(*Archive); ok {
		// One archive file holds every image: written once, at the end.
		a.Begin()
		defer func() {
			if err := a.Flush(); err != nil {
				for i := range out {
					if out[i].Status == StatusBuilt {
						out[i].Status, out[i].Ref, out[i].Err = StatusFailed, "", err
					}
				}
			}
		}()
	}
	for _, s := range sets {
		o := b.one(ctx, s)
		if b.Progress != nil {
			b.Progress(o)
		}
		out = append(out, o)
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

func (b *Batch) one(ctx context.Context, s PatchSet) Outcome {
	o := Outcome{ID: s.ID}
	fail := func(err error) Outcome {
		o.Status, o.Err = StatusFailed, err
		return o
	}
	var ps []*patches.Patch
	for _, n := range s.Patches {
		p, err := b.Resolve(n)
		if err != nil {
			return fail(err)
		}
		ps = append(ps, p)
	}
	res, err := b.Base.Build(ctx, Cell{ID: s.ID, Patches: ps, Env: s.Env, Labels: b.Labels}, b.Options)
	if err != nil {
		return fail(err)
	}
	built := res.Built
	o.Digest, o.PatchSet = built.Digest.String(), built.Manifest.PatchSet
	if ref, ok, err := b.Dest.Has(ctx, s.ID, built.Digest); err != nil {
		return fail(err)
	} else if ok {
		o.Status, o.Ref = StatusSkipped, ref
		return o
	}
	ref, err := b.Dest.Put(ctx, s.ID, built.Image)
	if err != nil {
		return fail(err)
	}
	o.Status, o.Ref = StatusBuilt, ref
	return o
}

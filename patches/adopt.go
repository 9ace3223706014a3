package patches

import (
	"context"
	"fmt"
	"strings"

	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// AdoptError says why a change already on disk cannot be recorded as the
// patch: the patch, planned on the tree with its originals put back, does
// not leave the bytes the tree has.
type AdoptError struct{ Msg string }

func (e *AdoptError) Error() string { return e.Msg }

// Adopt records in t's journal that patch p is applied, on a tree that
// already has its change (made by hand: smpatch new, refresh). originals
// maps each file the change touched to the bytes it had before (nil: the
// change created it). p is planned, with variant (its name; "" lets the
// plan choose), on t with those originals put back; the plan must resolve
// and leave exactly the bytes on disk, or nothing is recorded. The entry
// then holds the originals, so revert restores them byte for byte. The
// files are written with the bytes they already have (one journal
// transaction), so a kill at any moment leaves them as they are.
func Adopt(ctx context.Context, t source.WritableTree, p *Patch, variant string, originals map[string][]byte, opts ApplyOptions) (*ApplyResult, error) {
	res := &ApplyResult{Tree: t.Root(), Kind: string(t.Kind()), Recovered: []string{}, Notices: []string{}, Patches: []*PatchOutcome{}}
	ov := &overlay{t: t, files: map[string][]byte{}}
	var rels []string
	for rel, b := range originals {
		ov.files[rel] = b
		rels = append(rels, rel)
	}
	pl, err := NewPlan(ctx, p, ov, PlanOptions{Variant: variant})
	if err != nil {
		return res, err
	}
	pl.shown = shownIn(t)
	if !pl.OK(false) {
		why := pl.Reason
		if pl.Refused != "" {
			why = pl.Refused
		}
		return res, &AdoptError{fmt.Sprintf("%s does not apply to the pristine files: %s; nothing was recorded", p.Name, why)}
	}
	changes := planChanges(pl)
	planned := map[string]bool{}
	for _, c := range changes {
		planned[c.fp.Path] = true
		same, err := sameBytes(t, c.fp.Path, c.new)
		if err != nil {
			return res, err
		}
		if !same {
			return res, &AdoptError{fmt.Sprintf("%s: %s on the pristine file does not give the bytes %s has; nothing was recorded", p.Name, p.Name, source.ShownPath(t, c.fp.Path))}
		}
	}
	var missing []string
	for _, rel := range rels {
		if !planned[rel] {
			missing = append(missing, source.ShownPath(t, rel))
		}
	}
	if len(missing) > 0 {
		return res, &AdoptError{fmt.Sprintf("%s does not change %s; nothing was recorded", p.Name, strings.Join(missing, ", "))}
	}
	j, err := openForApply(ctx, t, &Set{Plans: []*Plan{pl}}, opts, res)
	if err != nil {
		return res, err
	}
	defer j.Close()
	if e := j.State().Get(p.Name); e != nil {
		return res, &AdoptError{fmt.Sprintf("%s: the journal of %s already has an entry (%s); `smpatch revert %s` or `smpatch journal forget %s` first", p.Name, t.Root(), e.State, p.Name, p.Name)}
	}
	it := &applyItem{p: pl, changes: changes}
	a := &applier{ctx: ctx, t: t, j: j, opts: opts, res: res, slots: map[*applyItem]int{}, writes: map[string]bool{}}
	item := a.journalItem(it)
	item.Entry.Notes = append(item.Entry.Notes, "recorded from the tree as it was (the change was made by hand)")
	check := func() error { return readBack(t, changes) }
	if err := j.Apply(ctx, []*journal.Item{item}, check); err != nil {
		return res, err
	}
	po := outcomeOf(pl, "recorded")
	po.Reason = "the tree's change recorded as applied"
	for i, c := range changes {
		for _, f := range po.Files {
			if f.Path == c.fp.Path {
				f.Original, f.Patched = item.Entry.Files[i].Original, item.Entry.Files[i].Patched
			}
		}
	}
	res.Patches = append(res.Patches, po)
	res.Set = &Set{Tree: t, Plans: []*Plan{pl}}
	return res, nil
}

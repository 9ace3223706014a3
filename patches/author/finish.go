package author

import (
	"context"
	"fmt"
	"strings"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/udiff"
	"github.com/smpatch/smpatch/source"
)

// FinishMode is how a conflicting patch is left for the user to finish.
type FinishMode int

const (
	// Merge writes each conflicting hunk as three-way conflict markers
	// (the tree's lines, the patch's base, the patch's result) where the
	// hunk belongs, the other hunks applied.
	Merge FinishMode = iota + 1
	// Reject applies the hunks that resolve and writes the others to
	// FILE.rej, as a unified diff.
	Reject
)

// Finished says what Finish wrote.
type Finished struct {
	Patch   string
	Variant string
	// Files are the tree files written, each with what was left in it.
	Files []string
	// Rejects are the .rej files written.
	Rejects []string
}

// Finish leaves plan pl, which conflicts, for the user to finish in t:
// the hunks that resolve are applied, each conflicting one is written as
// conflict markers (Merge; a hunk with no place found goes to a .rej file
// instead) or to FILE.rej (Reject). Nothing is journaled: the tree now has
// a change of the user's, which `smpatch refresh NAME` records once it is
// finished. Each file is written atomically; nothing else changes.
func Finish(ctx context.Context, t source.WritableTree, pl *patches.Plan, mode FinishMode) (*Finished, error) {
	out := &Finished{Patch: pl.Patch.Name, Variant: patches.VariantLabel(pl.Variant)}
	writes := map[string][]byte{}
	for _, fp := range pl.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !fp.Conflicts() {
			if fp.New != nil || fp.Delete {
				writes[fp.Path] = fp.New
				out.Files = append(out.Files, source.ShownPath(t, fp.Path)+": applied")
			}
			continue
		}
		if fp.Old == nil || fp.Create || fp.Delete {
			rej := fp.Path + ".rej"
			writes[rej] = fp.Diff.Format()
			out.Rejects = append(out.Rejects, source.ShownPath(t, rej))
			continue
		}
		var good, bad []*udiff.Hunk
		for i, h := range fp.Diff.Hunks {
			if i < len(fp.Hunks) && fp.Hunks[i].Status == patches.Conflict {
				bad = append(bad, h)
			} else {
				good = append(good, h)
			}
		}
		data := fp.Old
		if len(good) > 0 {
			r := udiff.Match(data, &udiff.FileDiff{OldPath: fp.Diff.OldPath, NewPath: fp.Diff.NewPath, Hunks: good})
			if r.New != nil {
				data = r.New
			}
		}
		var rejected []*udiff.Hunk
		marked := 0
		if mode == Merge {
			// Bottom up, so that the lines above keep their numbers.
			for i := len(bad) - 1; i >= 0; i-- {
				h := bad[i]
				r := udiff.Match(data, &udiff.FileDiff{OldPath: fp.Diff.OldPath, NewPath: fp.Diff.NewPath, Hunks: []*udiff.Hunk{h}})
				if len(r.Hunks) == 0 || r.Hunks[0].Nearest == nil {
					rejected = append([]*udiff.Hunk{h}, rejected...)
					continue
				}
				data = markers(data, r.Hunks[0].Nearest, h, source.ShownPath(t, fp.Path), pl.Patch.Name, out.Variant)
				marked++
			}
		} else {
			rejected = bad
		}
		writes[fp.Path] = data
		what := fmt.Sprintf("%d of %d hunks applied", len(good), len(fp.Diff.Hunks))
		if marked > 0 {
			what += fmt.Sprintf(", %d as conflict markers", marked)
		}
		if len(rejected) > 0 {
			rej := fp.Path + ".rej"
			writes[rej] = (&udiff.FileDiff{OldPath: fp.Diff.OldPath, NewPath: fp.Diff.NewPath, Hunks: rejected}).Format()
			out.Rejects = append(out.Rejects, source.ShownPath(t, rej))
			what += fmt.Sprintf(", %d in %s", len(rejected), source.ShownPath(t, rej))
		}
		out.Files = append(out.Files, source.ShownPath(t, fp.Path)+": "+what)
	}
	var rels []string
	for rel := range writes {
		rels = append(rels, rel)
	}
	if err := t.CheckWrites(rels); err != nil {
		return nil, err
	}
	if err := t.WriteFiles(writes); err != nil {
		return nil, err
	}
	return out, nil
}

// markers replaces the region reg (1-based lines of data) with three-way
// conflict markers: the tree's lines, the hunk's old side (the patch's
// base) and its new side (the patch's result).
func markers(data []byte, reg *udiff.Region, h *udiff.Hunk, file, name, variant string) []byte {
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	start, end := max(reg.Start, 1)-1, min(reg.End, len(lines))
	if start > end {
		start = end
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<<<<<<< %s (the tree)\n", file)
	for _, l := range lines[start:end] {
		b.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "||||||| %s %s (its base)\n", name, variant)
	for i, op := range h.Ops {
		if op != '+' {
			b.WriteString(h.Lines[i] + "\n")
		}
	}
	b.WriteString("=======\n")
	for i, op := range h.Ops {
		if op != '-' {
			b.WriteString(h.Lines[i] + "\n")
		}
	}
	fmt.Fprintf(&b, ">>>>>>> %s %s (the patch)\n", name, variant)
	return []byte(strings.Join(lines[:start], "") + b.String() + strings.Join(lines[end:], ""))
}

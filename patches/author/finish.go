package author

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/internal/words"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/journal"
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

// FinishOptions steer Finish.
type FinishOptions struct {
	Mode        FinishMode
	ToolVersion string
	Waiting     func(line string)
}

// Finish leaves plan pl, which conflicts, for the user to finish in t:
// the hunks that resolve are applied and each conflicting one is written
// as conflict markers (Merge) or to FILE.rej (Reject). With Merge, a file
// whose full base is at hand (the variant's base commit, in [upstream]
// clone or the tree's own repository) is merged three-way, the tree's
// file against the patch's result on that base, so only the regions both
// changed are marked; else each conflicting hunk is marked where its
// nearest place is, its own lines as the base, and a hunk with no place
// goes to a .rej file.
//
// What it writes is journaled as an entry of the patch's name marked as
// left to finish by hand, with the bytes before: `smpatch revert NAME`
// puts them back and removes the .rej files it created, and `smpatch
// refresh NAME` records the finished edit in its place. Each file is
// written atomically, in one journal transaction.
func Finish(ctx context.Context, t source.WritableTree, pl *patches.Plan, opts FinishOptions) (*Finished, error) {
	out := &Finished{Patch: pl.Patch.Name, Variant: patches.VariantLabel(pl.Variant)}
	if e, err := journalEntry(ctx, t, pl.Patch.Name); err != nil {
		return nil, err
	} else if e != nil {
		return nil, inputf("%s: the journal has an entry %s already (%s): `smpatch revert %s` first", t.Root(), pl.Patch.Name, e.State, pl.Patch.Name)
	}
	label := pl.Patch.Name + " " + out.Variant
	writes := map[string][]byte{}
	for _, fp := range pl.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		shown := source.ShownPath(t, fp.Path)
		if !fp.Conflicts() {
			if fp.New != nil || fp.Delete {
				writes[fp.Path] = fp.New
				out.Files = append(out.Files, shown+": applied")
			}
			continue
		}
		if fp.Old == nil || fp.Create || fp.Delete {
			rej := fp.Path + ".rej"
			writes[rej] = fp.Diff.Format()
			out.Rejects = append(out.Rejects, source.ShownPath(t, rej))
			continue
		}
		if opts.Mode == Merge {
			if base, from := baseOf(t, pl, fp.Path); base != nil {
				if r := udiff.Match(base, fp.Diff); !r.Conflicts() && r.New != nil {
					data, n := merge3(base, fp.Old, r.New, shown, label)
					writes[fp.Path] = data
					what := fmt.Sprintf("merged three-way against its base file (%s): %d %s marked", from, n, words.Plural(n, "conflict", "conflicts"))
					if n == 0 {
						what = fmt.Sprintf("merged three-way against its base file (%s), no conflict left: check it", from)
					}
					out.Files = append(out.Files, shown+": "+what)
					continue
				}
			}
		}
		data, what, rejected := finishHunks(t, fp, opts.Mode, label)
		writes[fp.Path] = data
		if len(rejected) > 0 {
			rej := fp.Path + ".rej"
			writes[rej] = (&udiff.FileDiff{OldPath: fp.Diff.OldPath, NewPath: fp.Diff.NewPath, Hunks: rejected}).Format()
			out.Rejects = append(out.Rejects, source.ShownPath(t, rej))
			what += fmt.Sprintf(", %d in %s", len(rejected), source.ShownPath(t, rej))
		}
		out.Files = append(out.Files, shown+": "+what)
	}
	if err := journalFinish(ctx, t, pl, writes, opts); err != nil {
		return nil, err
	}
	return out, nil
}

// finishHunks applies fp's hunks that resolve and, with Merge, marks each
// conflicting one where its nearest place is (its own lines as the base);
// it returns the file, what was done, and the hunks left for a .rej file.
func finishHunks(t source.Tree, fp *patches.FilePlan, mode FinishMode, label string) ([]byte, string, []*udiff.Hunk) {
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
			data = markers(data, r.Hunks[0].Nearest, h, source.ShownPath(t, fp.Path), label)
			marked++
		}
	} else {
		rejected = bad
	}
	what := fmt.Sprintf("%d of %d hunks applied", len(good), len(fp.Diff.Hunks))
	if marked > 0 {
		what += fmt.Sprintf(", %d as conflict markers (each hunk's own lines as its base: no base file at hand)", marked)
	}
	return data, what, rejected
}

// journalFinish writes the files in one journal transaction, as an entry
// of the patch marked as left to finish by hand, with the bytes before.
func journalFinish(ctx context.Context, t source.WritableTree, pl *patches.Plan, writes map[string][]byte, opts FinishOptions) error {
	var rels []string
	for rel := range writes {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	if err := t.CheckWrites(rels); err != nil {
		return err
	}
	e := &journal.Entry{Name: pl.Patch.Name, Project: string(pl.Patch.Project), Variant: patches.VariantLabel(pl.Variant),
		Version: pl.Version, VersionFrom: pl.VersionFrom, Origin: pl.Patch.Origin, PatchDigest: pl.Patch.Digest, ToolVersion: opts.ToolVersion,
		Notes: []string{finishNote + " (apply --merge or --reject): finish the edit, then `smpatch refresh " + pl.Patch.Name + "`; `smpatch revert " + pl.Patch.Name + "` puts back the bytes before"}}
	it := &journal.Item{Entry: e}
	for _, rel := range rels {
		old, err := readTree(t, rel)
		if err != nil {
			return err
		}
		it.Writes = append(it.Writes, journal.Write{Path: rel, Old: old, New: writes[rel]})
	}
	j, err := journal.Open(ctx, t, journal.Options{Waiting: opts.Waiting})
	if err != nil {
		return err
	}
	defer j.Close()
	if e := j.State().Get(pl.Patch.Name); e != nil {
		return inputf("%s: the journal has an entry %s already (%s): `smpatch revert %s` first", t.Root(), pl.Patch.Name, e.State, pl.Patch.Name)
	}
	return j.Apply(ctx, []*journal.Item{it}, nil)
}

// markers replaces the region reg (1-based lines of data) with three-way
// conflict markers: the tree's lines, the hunk's old side (the patch's
// base) and its new side (the patch's result).
func markers(data []byte, reg *udiff.Region, h *udiff.Hunk, file, label string) []byte {
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
	fmt.Fprintf(&b, "||||||| %s (its base)\n", label)
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
	fmt.Fprintf(&b, ">>>>>>> %s (the patch)\n", label)
	return []byte(strings.Join(lines[:start], "") + b.String() + strings.Join(lines[end:], ""))
}

package patches

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/smpatch/smpatch/internal/words"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/patches/udiff"
	"github.com/smpatch/smpatch/source"
)

// RevertOptions steer Revert.
type RevertOptions struct {
	// Force reverse-applies only the patch's own hunks to files changed
	// since apply, keeping the other edits.
	Force bool
	// Waiting is told, once, when another smpatch holds the tree's journal
	// for a moment (one line for people).
	Waiting func(line string)
	// LockTimeout bounds the wait for the journal's lock (0:
	// journal.DefaultLockTimeout).
	LockTimeout time.Duration
}

// RevertResult says what Revert did, or why it refused.
type RevertResult struct {
	Tree       string           `json:"tree"`
	Kind       string           `json:"kind"`
	Recovered  []string         `json:"recovered"`
	Patches    []*RevertOutcome `json:"patches"`
	NotApplied []string         `json:"not_applied"`
}

// RevertOutcome is one patch of a RevertResult.
type RevertOutcome struct {
	Name string `json:"name"`
	// Status is "reverted" or "refused".
	Status string        `json:"status"`
	Files  []*RevertFile `json:"files"`
}

// RevertFile is one file of a RevertOutcome.
type RevertFile struct {
	Path string `json:"path"`
	// State: "restored" (original bytes back), "already-original",
	// "forced" (our hunks reverse-applied, other edits kept), "changed"
	// (refused: changed since apply), "not-regular" (refused: a symlink,
	// a named pipe or a directory stands at its path), "not-written" (the
	// revert was refused for another file).
	State string `json:"state"`
	// Diff shows, for a changed file, what changed since apply
	// (patched → current).
	Diff       string   `json:"diff"`
	PycRemoved []string `json:"pyc_removed"`
	// PycRestored is the bytecode apply removed, put back beside the
	// original bytes.
	PycRestored []string `json:"pyc_restored"`
}

// RevertRefusedError is a revert refused with nothing written: a patched
// file changed since it was applied (Result then holds the difference of
// every such file), --force could not take the patch's hunks out of one,
// or another applied patch needs one being reverted.
type RevertRefusedError struct {
	Result *RevertResult
	Msg    string
}

func (e *RevertRefusedError) Error() string { return e.Msg }

// revertStep is what Revert writes for one entry.
type revertStep struct {
	out *RevertOutcome
	js  *journal.RevertStep
}

// Revert restores the original bytes of the named applied patches (every
// applied patch, newest first, when names is empty). A file changed since
// apply makes it refuse (*RevertRefusedError) with nothing written,
// unless opts.Force. A name that is in neither the journal nor the catalog
// is an error with a did-you-mean; a known patch that is not applied is
// listed in NotApplied. ctx ending is a *journal.StoppedError saying what
// was left.
func Revert(ctx context.Context, t source.WritableTree, cat *Catalog, names []string, opts RevertOptions) (*RevertResult, error) {
	res := &RevertResult{Tree: t.Root(), Kind: string(t.Kind()), Recovered: []string{}, Patches: []*RevertOutcome{}, NotApplied: []string{}}
	// Without a journal there is nothing to lock or revert (the journal
	// itself is read, and checked, once locked).
	if ok, err := journal.Exists(t); err != nil || !ok {
		if err == nil {
			err = notApplied(cat, names, nil, res)
		}
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, &journal.StoppedError{What: "stopped before writing: nothing was changed", Err: err}
	}
	j, err := journal.Open(ctx, t, journal.Options{Waiting: opts.Waiting, LockTimeout: opts.LockTimeout})
	if err != nil {
		return res, err
	}
	defer j.Close()
	rec, err := j.Recover()
	if rec != nil {
		res.Recovered = rec
	}
	if err != nil {
		return res, err
	}
	st := j.State()
	if err := notApplied(cat, names, st, res); err != nil {
		return res, err
	}
	// Newest first.
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var sel []*journal.Entry
	for i := len(st.Patches) - 1; i >= 0; i-- {
		if e := st.Patches[i]; len(names) == 0 || want[e.Name] {
			sel = append(sel, e)
		}
	}
	if err := neededBy(st, cat, sel); err != nil {
		return res, err
	}
	if err := stackedOn(st, sel); err != nil {
		return res, err
	}
	steps, err := revertSteps(t, j, sel, opts.Force, res)
	if err != nil {
		return res, err
	}
	var paths []string
	for _, s := range steps {
		for _, w := range s.js.Writes {
			paths = append(paths, w.Path)
		}
	}
	if err := t.CheckWrites(paths); err != nil {
		return res, err
	}
	return res, writeReverts(ctx, t, j, steps)
}

// notApplied checks names: a name st has is left for the revert, a name
// the catalog knows is listed not applied, any other is the catalog's
// did-you-mean error.
func notApplied(cat *Catalog, names []string, st *journal.State, res *RevertResult) error {
	for _, n := range names {
		if st != nil && st.Get(n) != nil {
			continue
		}
		if cat != nil {
			if _, err := cat.Get(n); err != nil {
				return err
			}
		}
		res.NotApplied = append(res.NotApplied, n)
	}
	return nil
}

// stackedOn refuses to revert a patch under another one: a later applied
// patch, not reverted with it, that changed one of its files again (a
// series to one file comes out newest first).
func stackedOn(st *journal.State, sel []*journal.Entry) error {
	in := map[*journal.Entry]bool{}
	for _, e := range sel {
		in[e] = true
	}
	for i, e := range st.Patches {
		if !in[e] {
			continue
		}
		for _, g := range st.Patches[i+1:] {
			if in[g] || g.State != journal.Applied {
				continue
			}
			for _, f := range e.Files {
				if slices.ContainsFunc(g.Files, func(gf *journal.FileRecord) bool { return gf.Path == f.Path }) {
					return &RevertRefusedError{Msg: fmt.Sprintf("revert refused: %s, applied after %s, changed %s again: revert it first, or both (smpatch revert %s %s)", g.Name, e.Name, f.Path, g.Name, e.Name)}
				}
			}
		}
	}
	return nil
}

// revertSteps works out the bytes every file of sel gets, on an overlay of
// the tree (an entry reverted after another sees what the other writes),
// so that a refusal writes nothing: a file changed since apply refuses the
// whole revert, unless force takes the patch's hunks back out of it.
func revertSteps(t source.WritableTree, j *journal.Journal, sel []*journal.Entry, force bool, res *RevertResult) ([]*revertStep, error) {
	overlay := map[string][]byte{}
	cur := func(p string) ([]byte, error) {
		if b, ok := overlay[p]; ok {
			return b, nil
		}
		b, err := journal.ReadCurrent(t, p)
		if err == nil {
			overlay[p] = b
		}
		return b, err
	}
	var steps []*revertStep
	var changed, odd []string
	oddEntry := ""
	for _, e := range sel {
		st := &revertStep{out: &RevertOutcome{Name: e.Name, Status: "reverted", Files: []*RevertFile{}},
			js: &journal.RevertStep{Entry: e, Forced: map[string]bool{}}}
		for _, f := range e.Files {
			rf := &RevertFile{Path: f.Path, PycRemoved: []string{}, PycRestored: []string{}}
			st.out.Files = append(st.out.Files, rf)
			if _, ok := overlay[f.Path]; !ok {
				// A symlink, a named pipe or a directory where the patched
				// file was: nothing is read through it, or written over it.
				if _, other, err := journal.Look(t, f.Path); err != nil {
					return nil, err
				} else if other != "" {
					rf.State = "not-regular"
					odd = append(odd, f.Path+" ("+other+")")
					if oddEntry == "" {
						oddEntry = e.Name
					}
					continue
				}
			}
			c, err := cur(f.Path)
			if err != nil {
				return nil, err
			}
			switch h := journal.Hash(c); {
			case h == f.Patched:
				orig, err := j.Original(e, f)
				if err != nil {
					return nil, err
				}
				rf.State = "restored"
				st.js.Writes = append(st.js.Writes, journal.Write{Path: f.Path, Old: c, New: orig})
				overlay[f.Path] = orig
			case h == f.Original:
				rf.State = "already-original"
			default:
				patched, perr := j.Patched(e, f)
				if perr != nil {
					patched = nil
				}
				rf.Diff = string(udiff.Between(f.Path, patched, c))
				if !force {
					rf.State = "changed"
					changed = append(changed, f.Path)
					continue
				}
				orig, err := j.Original(e, f)
				if err != nil {
					return nil, err
				}
				nb, err := reverseApply(f.Path, orig, patched, c)
				if err != nil {
					return nil, &RevertRefusedError{Msg: fmt.Sprintf("revert --force %s: %v", e.Name, err)}
				}
				rf.State = "forced"
				st.js.Writes = append(st.js.Writes, journal.Write{Path: f.Path, Old: c, New: nb})
				st.js.Forced[f.Path] = true
				overlay[f.Path] = nb
			}
		}
		steps = append(steps, st)
		res.Patches = append(res.Patches, st.out)
	}
	if len(changed) > 0 || len(odd) > 0 {
		// Nothing is written: a file that would have been restored (or
		// reverse-applied) says so, and no patch counts as reverted.
		for _, st := range steps {
			st.out.Status = "refused"
			for _, f := range st.out.Files {
				if f.State == "restored" || f.State == "forced" {
					f.State = "not-written"
				}
			}
		}
		if len(odd) > 0 {
			return nil, &RevertRefusedError{Result: res, Msg: fmt.Sprintf("revert refused: %s; smpatch restores only regular files (put the file back at its path, or run `smpatch journal forget %s` to keep the tree as it is); nothing was changed", strings.Join(odd, ", "), oddEntry)}
		}
		return nil, &RevertRefusedError{Result: res, Msg: fmt.Sprintf("revert refused: %s changed since the patch was applied (--force reverse-applies only the patch's hunks and keeps the other edits)", strings.Join(changed, ", "))}
	}
	return steps, nil
}

// writeReverts writes steps in journal transactions: one for the steps
// that write different files; a step that writes a file the transaction
// already writes starts the next. Each file written loses its stale
// bytecode. ctx ending between two transactions, or during the last one
// once it is past its point of no return, is a *journal.StoppedError
// naming what was reverted.
func writeReverts(ctx context.Context, t source.WritableTree, j *journal.Journal, steps []*revertStep) error {
	var batch, done []*revertStep
	writes := map[string]bool{}
	flush := func() error {
		js := make([]*journal.RevertStep, len(batch))
		for i, st := range batch {
			js[i] = st.js
		}
		if err := j.Revert(ctx, js); err != nil {
			if _, ok := err.(*journal.StoppedError); ok && len(done) > 0 {
				return &journal.StoppedError{Err: ctx.Err(), What: fmt.Sprintf("stopped after reverting %s; %s still applied: `smpatch revert` reverts the rest",
					stepNames(done), stepNames(batch))}
			}
			return err
		}
		for _, st := range batch {
			for _, f := range st.out.Files {
				if pyc := st.js.PycRemoved[f.Path]; pyc != nil {
					f.PycRemoved = pyc
				}
				if pyc := st.js.PycRestored[f.Path]; pyc != nil {
					f.PycRestored = pyc
				}
			}
		}
		done = append(done, batch...)
		batch, writes = nil, map[string]bool{}
		return nil
	}
	for _, st := range steps {
		for _, w := range st.js.Writes {
			if writes[w.Path] {
				if err := flush(); err != nil {
					return err
				}
				break
			}
		}
		for _, w := range st.js.Writes {
			writes[w.Path] = true
		}
		batch = append(batch, st)
	}
	if err := flush(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil && len(done) > 0 {
		return &journal.StoppedError{Err: err, What: fmt.Sprintf("stopped after the revert was under way, which was finished: %s %s reverted", stepNames(done), words.Plural(len(done), "is", "are"))}
	}
	return nil
}

func stepNames(steps []*revertStep) string {
	names := make([]string, len(steps))
	for i, st := range steps {
		names[i] = st.out.Name
	}
	return strings.Join(names, ", ")
}

// reverseApply takes the change the patch made to one file (orig → patched)
// back out of cur, keeping every other edit in cur.
func reverseApply(rel string, orig, patched, cur []byte) ([]byte, error) {
	if patched == nil {
		return nil, fmt.Errorf("%s: the journal has no copy of the patched file", rel)
	}
	if orig == nil {
		return nil, fmt.Errorf("%s: the patch created this file and it changed since; remove it by hand", rel)
	}
	if cur == nil {
		return nil, fmt.Errorf("%s: the file is gone", rel)
	}
	fd := &FileDiff{OldPath: rel, NewPath: rel, Hunks: udiff.Hunks(patched, orig, udiff.Context), Source: path.Join(source.StateDirName, "patched", rel)}
	fp := udiff.Match(cur, fd)
	for _, h := range fp.Hunks {
		if h.Status == Conflict {
			r := h.Reason
			if r == "" {
				r = "the patch's lines were edited"
			}
			return nil, fmt.Errorf("%s: hunk #%d conflicts with the edits made since apply: %s", rel, h.Index+1, r)
		}
	}
	if fp.New == nil {
		return []byte{}, nil
	}
	return fp.New, nil
}

// neededBy refuses to revert a patch that another applied patch, not
// reverted in the same call, needs (by the catalog's "needs"): the other
// one would be left without what it builds on.
func neededBy(st *journal.State, cat *Catalog, sel []*journal.Entry) error {
	if cat == nil {
		return nil
	}
	going := map[string]bool{}
	for _, e := range sel {
		going[e.Name] = true
	}
	for _, e := range st.Patches {
		if going[e.Name] || e.State != journal.Applied {
			continue
		}
		p, ok := cat.Lookup(e.Name)
		if !ok {
			continue
		}
		for _, n := range p.Needs {
			if going[n] {
				return &RevertRefusedError{Msg: fmt.Sprintf("%s is applied and needs %s: revert %s first, or both: smpatch revert %s %s; nothing was changed", e.Name, n, e.Name, e.Name, n)}
			}
		}
	}
	return nil
}

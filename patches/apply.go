package patches

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/smpatch/smpatch/internal/words"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// ApplyOptions steer Apply.
type ApplyOptions struct {
	DryRun bool // recover, check and plan again if needed; write nothing
	// Check runs under the journal lock, after the journal is recovered and
	// the set is planned on the tree as it is, before anything is written
	// (the architecture gate). Its notes are recorded in each journal
	// entry; its error stops Apply with nothing written.
	Check func(ctx context.Context, s *Set) (notes []string, err error)
	// Notes are recorded in the journal entry (the matrix cell, say).
	Notes []string
	// ToolVersion and CatalogDigest are recorded in the journal.
	ToolVersion   string
	CatalogDigest string
	// Waiting is told, once, when another smpatch holds the tree's journal
	// for a moment (one line for people).
	Waiting func(line string)
	// LockTimeout bounds the wait for the journal's lock (0:
	// journal.DefaultLockTimeout).
	LockTimeout time.Duration
}

// ApplyResult says what Apply did.
type ApplyResult struct {
	Tree string `json:"tree"`
	Kind string `json:"kind"`
	// Recovered lists entries left in flight by an earlier command that were
	// rolled back or finished first.
	Recovered []string `json:"recovered"`
	// Notices tell of journal entries found stale: the journal said
	// applied but the files no longer had the patched bytes.
	Notices []string        `json:"notices"`
	Patches []*PatchOutcome `json:"patches"`
	// Set is the set as written (planned again when the tree changed
	// since it was planned).
	Set *Set `json:"-"`
}

// PatchOutcome is one patch's part of an ApplyResult.
type PatchOutcome struct {
	Name          string `json:"name"`
	Variant       string `json:"variant"`
	VariantReason string `json:"variant_reason"`
	Version       string `json:"version"`
	VersionFrom   string `json:"version_from"`
	Outcome       string `json:"outcome"`
	// Status is "applied", "already-applied" (journal or tree already has
	// it), "would-apply" (dry run).
	Status string         `json:"status"`
	Reason string         `json:"reason"`
	Files  []*FileOutcome `json:"files"`
}

// FileOutcome is one file of a PatchOutcome.
type FileOutcome struct {
	Path       string       `json:"path"`
	Note       string       `json:"note"` // how a moved target was found
	Hunks      []HunkResult `json:"hunks"`
	Original   string       `json:"original_sha256"` // "" when the patch creates the file, or nothing was written
	Patched    string       `json:"patched_sha256"`  // "" when the patch deletes the file, or nothing was written
	PycRemoved []string     `json:"pyc_removed"`
}

// ConflictError is returned when a set does not apply; it carries the
// set (as planned when Apply gave up) and its Problem, so callers can show
// every plan and every conflicting hunk.
type ConflictError struct {
	Set     *Set
	Problem *Problem
}

func (e *ConflictError) Error() string { return e.Problem.Error() + "; nothing was changed" }

// changedFile is one file a plan writes: the bytes it has (nil: absent)
// and the bytes it gets (nil: removed).
type changedFile struct {
	fp       *FilePlan
	old, new []byte
}

func planChanges(p *Plan) []changedFile {
	var out []changedFile
	for _, fp := range p.Files {
		old, nw := fp.Old, fp.New
		if fp.Delete {
			nw = nil
		} else if nw == nil {
			nw = []byte{}
		}
		if fp.Create {
			old = nil
		} else if old == nil {
			old = []byte{}
		}
		if (old == nil) == (nw == nil) && bytes.Equal(old, nw) {
			continue
		}
		out = append(out, changedFile{fp, old, nw})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].fp.Path < out[j].fp.Path })
	return out
}

// Apply writes a planned set to t under the journal. It takes the journal
// lock and recovers the journal once (an entry left in flight by a killed
// command is rolled back or finished), then compares the bytes the set was
// planned on with the bytes on disk and plans the set again only if they
// differ. opts.Check runs after the recovery; then a set that does not
// apply is a *ConflictError; a dry run stops there.
//
// The patches are then written in journal transactions (journal.Apply):
// all in one, unless a patch needs the disk as the patches before it left
// it (its entry is checked against the files, or it is planned again) or
// writes a file the transaction already writes. A patch already applied
// (by the journal) is reported, not written again. Any failure leaves
// every file of the call as it was: a failed transaction is rolled back,
// and so are the transactions of the call before it. ctx ending is a
// *journal.StoppedError saying what was left.
func Apply(ctx context.Context, t source.WritableTree, s *Set, opts ApplyOptions) (*ApplyResult, error) {
	res := &ApplyResult{Tree: t.Root(), Kind: string(t.Kind()), Recovered: []string{}, Notices: []string{}, Patches: []*PatchOutcome{}}
	j, err := openForApply(ctx, t, s, opts, res)
	if err != nil {
		return res, err
	}
	if j != nil {
		defer j.Close()
	}
	notes := opts.Notes
	if opts.Check != nil {
		more, err := opts.Check(ctx, s)
		if err != nil {
			return res, err
		}
		notes = append(append([]string(nil), notes...), more...)
	}
	stale, err := s.stale(t)
	if err != nil {
		return res, err
	}
	if stale {
		if s, err = PlanSet(ctx, t, s.patches(), SetOptions{Strict: s.Strict, Variants: s.Variants}); err != nil {
			return res, stopped(ctx, err)
		}
	}
	res.Set = s
	if prob := s.Problem(); prob != nil {
		return res, &ConflictError{Set: s, Problem: prob}
	}
	if opts.DryRun {
		for _, p := range s.Plans {
			st := "would-apply"
			if p.Outcome() == OutcomeAlreadyApplied {
				st = "already-applied"
			}
			res.Patches = append(res.Patches, outcomeOf(p, st))
		}
		return res, nil
	}
	// The files were found writable before the journal was opened; a set
	// planned again may write others (the journal checks each
	// transaction's files again before writing).
	if stale {
		if err := t.CheckWrites(setWrites(s)); err != nil {
			return res, err
		}
	}
	opts.Notes = notes
	a := &applier{ctx: ctx, t: t, j: j, opts: opts, res: res, strict: s.Strict, slots: map[*applyItem]int{}, writes: map[string]bool{}}
	if err := a.run(s); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil && len(a.done) > 0 {
		var names []string
		for _, e := range a.done {
			names = append(names, e.Name)
		}
		return res, &journal.StoppedError{Err: err, What: fmt.Sprintf("stopped after the journal recorded the apply: %s %s applied; `smpatch revert` undoes it",
			strings.Join(names, ", "), words.Plural(len(names), "is", "are"))}
	}
	return res, nil
}

// openForApply opens and recovers t's journal for Apply; a dry run on a
// tree without a journal needs none (nil), and creates no state directory.
// Read-only targets are refused before the journal directory is created.
func openForApply(ctx context.Context, t source.WritableTree, s *Set, opts ApplyOptions, res *ApplyResult) (*journal.Journal, error) {
	if opts.DryRun {
		if ok, err := journal.Exists(t); err != nil || !ok {
			return nil, err
		}
	} else if err := t.CheckWrites(setWrites(s)); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &journal.StoppedError{What: "stopped before writing: nothing was changed", Err: err}
	}
	j, err := journal.Open(ctx, t, journal.Options{Waiting: opts.Waiting, LockTimeout: opts.LockTimeout})
	if err != nil {
		return nil, err
	}
	rec, err := j.Recover()
	if rec != nil {
		res.Recovered = rec
	}
	if err != nil {
		j.Close()
		return nil, err
	}
	return j, nil
}

// stopped is err, or, when ctx has ended, the stop before anything was
// written that it caused.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &journal.StoppedError{What: "stopped before writing: nothing was changed", Err: ctx.Err()}
	}
	return err
}

// applier writes the plans of one Apply in journal transactions.
type applier struct {
	ctx    context.Context
	t      source.WritableTree
	j      *journal.Journal
	opts   ApplyOptions
	res    *ApplyResult
	strict bool
	// done are the entries the call's transactions recorded applied.
	done []*journal.Entry
	// batch is the transaction being gathered, writes the files it writes,
	// slots each item's place in res.Patches.
	batch  []*applyItem
	writes map[string]bool
	slots  map[*applyItem]int
	// skipped is set once a patch the journal had applied was skipped with
	// changes planned: the plans after it may meet other bytes.
	skipped bool
}

// applyItem is one patch of a transaction: its plan and what it writes,
// and the stale entry it replaces (with the records kept from it), if any.
type applyItem struct {
	p       *Plan
	replace *journal.Entry
	kept    []journal.Kept
	changes []changedFile
}

// run writes every plan of s, in transactions.
func (a *applier) run(s *Set) error {
	for i, p := range s.Plans {
		if err := a.add(s, i, p); err != nil {
			return a.fail(err)
		}
	}
	if err := a.flush(); err != nil {
		return a.fail(err)
	}
	return nil
}

// add takes plan p (the i-th of s): reported when the journal or the tree
// already has it, else added to the transaction (after writing the
// transaction so far when p needs the disk as it left it).
func (a *applier) add(s *Set, i int, p *Plan) error {
	e := a.j.State().Get(p.Patch.Name)
	applied := e != nil && e.State == journal.Applied
	if applied || a.skipped {
		if err := a.flush(); err != nil {
			return err
		}
	}
	// An entry whose files no longer all have the patched bytes is stale
	// (the files were put back by hand, say): the plan decides, on the
	// files as they are now.
	var staleEntry *journal.Entry
	if applied {
		drift, err := entryDrift(a.t, e)
		if err != nil {
			return err
		}
		if len(drift) == 0 {
			a.skipped = a.skipped || len(planChanges(p)) > 0
			po := outcomeOf(p, "already-applied")
			po.Reason = fmt.Sprintf("already applied (variant %s, %s)", e.Variant, e.AppliedAt.Format(time.RFC3339))
			po.Variant = e.Variant
			po.Files = []*FileOutcome{}
			a.res.Patches = append(a.res.Patches, po)
			return nil
		}
		staleEntry = e
		a.res.Notices = append(a.res.Notices, fmt.Sprintf("%s: the journal says applied (%s) but %s no longer %s the patched bytes; planning it again on the files as they are",
			e.Name, e.AppliedAt.Format(time.RFC3339), strings.Join(drift, ", "), words.Plural(len(drift), "has", "have")))
	}
	// Each plan was made on the bytes the plans before it write, and the
	// set was just compared with the disk: only a plan after one skipped
	// with changes planned (the journal had it applied) can meet other
	// bytes.
	if a.skipped {
		st, err := planStale(a.t, p)
		if err != nil {
			return err
		}
		if st {
			rest, err := PlanSet(a.ctx, a.t, s.patches()[i:], SetOptions{Strict: a.strict, Variants: s.Variants})
			if err != nil {
				return err
			}
			if prob := rest.Problem(); prob != nil {
				return &ConflictError{Set: rest, Problem: prob}
			}
			p = rest.Plans[0]
		}
	}
	if p.Outcome() == OutcomeAlreadyApplied {
		po := outcomeOf(p, "already-applied")
		po.Reason = "already applied: the tree already has every change"
		if p.Retired != "" {
			po.Reason = "already upstream: " + p.Retired
		}
		if staleEntry != nil {
			// The journal entry stays: it still has the originals that
			// revert needs.
			po.Reason += " (files changed since apply; the journal entry is kept)"
		}
		a.res.Patches = append(a.res.Patches, po)
		return nil
	}
	it := &applyItem{p: p, replace: staleEntry, changes: planChanges(p)}
	for k, c := range it.changes {
		// Plans compose the diffs of one file into one file plan; two for
		// one path would journal and write it twice.
		if k > 0 && it.changes[k-1].fp.Path == c.fp.Path {
			return fmt.Errorf("%s: two file plans for %s; nothing was changed", p.Patch.Name, c.fp.Path)
		}
	}
	for _, c := range it.changes {
		if a.writes[c.fp.Path] {
			if err := a.flush(); err != nil {
				return err
			}
			break
		}
	}
	if staleEntry != nil {
		// The new entry replaces the stale one: the files written now get
		// the bytes they have now as originals; the files the plan leaves
		// alone keep their records and copies.
		var err error
		if it.kept, err = keptRecords(a.j, staleEntry, p); err != nil {
			return err
		}
	}
	for _, c := range it.changes {
		a.writes[c.fp.Path] = true
	}
	a.slots[it] = len(a.res.Patches)
	a.res.Patches = append(a.res.Patches, nil)
	a.batch = append(a.batch, it)
	return nil
}

// flush writes the transaction gathered so far.
func (a *applier) flush() error {
	if len(a.batch) == 0 {
		return nil
	}
	items := make([]*journal.Item, len(a.batch))
	for i, it := range a.batch {
		items[i] = a.journalItem(it)
	}
	// Every file the transaction wrote is read back first; the rules of
	// each patch then look at those bytes (the patches write different
	// files, so they are the bytes on disk for every patch's rules).
	check := func() error {
		written := map[string][]byte{}
		for _, it := range a.batch {
			if err := readBack(a.t, it.changes); err != nil {
				return err
			}
			for _, c := range it.changes {
				written[c.fp.Path] = c.new
			}
		}
		for _, it := range a.batch {
			if err := checkRules(a.t, it.p, written, "after writing"); err != nil {
				return err
			}
		}
		return nil
	}
	if err := a.j.Apply(a.ctx, items, check); err != nil {
		return err
	}
	for i, it := range a.batch {
		a.done = append(a.done, items[i].Entry)
		a.res.Patches[a.slots[it]] = appliedOutcome(a.t, it, items[i].Entry)
	}
	a.batch, a.writes = nil, map[string]bool{}
	return nil
}

// journalItem is the journal's record of it: its entry and the files it
// writes.
func (a *applier) journalItem(it *applyItem) *journal.Item {
	p := it.p
	e := &journal.Entry{
		Name:          p.Patch.Name,
		Project:       string(p.Patch.Project),
		VariantReason: p.VariantReason,
		Version:       p.Version,
		VersionFrom:   p.VersionFrom,
		Origin:        p.Patch.Origin,
		PatchDigest:   p.Patch.Digest,
		CatalogDigest: a.opts.CatalogDigest,
		ToolVersion:   a.opts.ToolVersion,
		Notes:         a.opts.Notes,
	}
	if p.Variant != nil {
		e.Variant = p.Variant.Name
	}
	ji := &journal.Item{Entry: e, Kept: it.kept, Replaces: it.replace}
	for _, c := range it.changes {
		ji.Writes = append(ji.Writes, journal.Write{Path: c.fp.Path, Old: c.old, New: c.new})
	}
	return ji
}

// fail rolls back the transactions of the call that were written, newest
// first, and returns err. Only the patches already reported stay in the
// result (none of the others was written).
func (a *applier) fail(err error) error {
	kept := a.res.Patches[:0]
	for _, po := range a.res.Patches {
		if po != nil {
			kept = append(kept, po)
		}
	}
	a.res.Patches = kept
	if errorsIsCrash(err) {
		return err
	}
	for i := len(a.done) - 1; i >= 0; i-- {
		if rerr := a.j.Undo(a.done[i]); rerr != nil {
			return fmt.Errorf("%w (and rolling back %s failed: %v)", err, a.done[i].Name, rerr)
		}
	}
	return err
}

// appliedOutcome is what the transaction did for it, its entry e: each
// file with its hashes and the stale bytecode removed beside it.
func appliedOutcome(t source.WritableTree, it *applyItem, e *journal.Entry) *PatchOutcome {
	po := outcomeOf(it.p, "applied")
	byPath := map[string]*FileOutcome{}
	for _, f := range po.Files {
		byPath[f.Path] = f
	}
	for i, c := range it.changes {
		f := byPath[c.fp.Path]
		if f == nil {
			f = &FileOutcome{Path: c.fp.Path, Hunks: []HunkResult{}}
			po.Files = append(po.Files, f)
		}
		f.Original, f.Patched = e.Files[i].Original, e.Files[i].Patched
		f.PycRemoved = journal.RemovePyc(t, c.fp.Path)
		if f.PycRemoved == nil {
			f.PycRemoved = []string{}
		}
	}
	return po
}

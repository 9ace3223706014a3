package patches

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/smpatch/smpatch/internal/exit"
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

// changedFile is one file a plan writes.
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
// apply is an error with exit.Conflict carrying a *ConflictError; a dry
// run stops there.
//
// Each patch is then written in turn: a pending entry with the original
// bytes, each file atomically, the entry marked applied. A patch already
// applied (by the journal) is reported, not written again. Any failure
// leaves every file of the call as it was: a failed patch is rolled back,
// and so are the patches the call applied before it.
func Apply(ctx context.Context, t source.WritableTree, s *Set, opts ApplyOptions) (*ApplyResult, error) {
	res := &ApplyResult{Tree: t.Root(), Kind: string(t.Kind()), Recovered: []string{}, Notices: []string{}, Patches: []*PatchOutcome{}}
	// A dry run on a tree without a journal needs no lock and creates no
	// state directory.
	var j *journal
	if !opts.DryRun || hasJournal(t) {
		// Refuse read-only targets before the journal directory is created.
		if !opts.DryRun {
			if err := checkWritable(t, setWrites(s)); err != nil {
				return res, err
			}
		}
		var err error
		if j, err = openJournal(ctx, t); err != nil {
			return res, err
		}
		defer j.close()
		rec, err := j.recover()
		if rec != nil {
			res.Recovered = rec
		}
		if err != nil {
			return res, err
		}
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
		if s, err = PlanSet(ctx, t, s.patches(), SetOptions{Strict: s.Strict}); err != nil {
			return res, err
		}
	}
	res.Set = s
	if prob := s.Problem(); prob != nil {
		return res, exit.With(exit.Conflict, &ConflictError{Set: s, Problem: prob})
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
	// planned again may write others (applyBatch checks its own files
	// again before writing).
	if stale {
		if err := checkWritable(t, setWrites(s)); err != nil {
			return res, err
		}
	}
	opts.Notes = notes
	// The patches are written in transactions (applyBatch): all of them in
	// one, unless a patch needs the disk as the patches before it left it
	// (its journal entry is checked against the files, or it must be
	// planned again) or writes a file the transaction already writes; the
	// transaction so far is written first.
	var done []*Entry
	var batch []*applyItem
	slots := map[*applyItem]int{} // the item's place in res.Patches
	batchWrites := map[string]bool{}
	fail := func(err error) (*ApplyResult, error) {
		// Only the patches already reported stay (none was written).
		kept := res.Patches[:0]
		for _, po := range res.Patches {
			if po != nil {
				kept = append(kept, po)
			}
		}
		res.Patches = kept
		if errors.Is(err, errCrash) {
			return res, err
		}
		for i := len(done) - 1; i >= 0; i-- {
			if rerr := j.rollback(done[i]); rerr != nil {
				return res, fmt.Errorf("%w (and rolling back %s failed: %v)", err, done[i].Name, rerr)
			}
		}
		return res, err
	}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		es, outs, err := j.applyBatch(ctx, batch, opts)
		if err != nil {
			return err
		}
		done = append(done, es...)
		for i, it := range batch {
			res.Patches[slots[it]] = outs[i]
		}
		batch, batchWrites = nil, map[string]bool{}
		return nil
	}
	skipped := false
	for i, p := range s.Plans {
		e := j.state.Get(p.Patch.Name)
		if (e != nil && e.State == StateApplied) || skipped {
			if err := flush(); err != nil {
				return fail(err)
			}
		}
		// An entry whose files no longer all have the patched bytes is
		// stale (the files were put back by hand, say): the plan decides,
		// on the files as they are now.
		var staleEntry *Entry
		if e != nil && e.State == StateApplied {
			drift, err := entryDrift(t, e)
			if err != nil {
				return fail(err)
			}
			if len(drift) == 0 {
				skipped = skipped || len(planChanges(p)) > 0
				po := outcomeOf(p, "already-applied")
				po.Reason = fmt.Sprintf("already applied (variant %s, %s)", e.Variant, e.AppliedAt.Format(time.RFC3339))
				po.Variant = e.Variant
				po.Files = []*FileOutcome{}
				res.Patches = append(res.Patches, po)
				continue
			}
			staleEntry = e
			res.Notices = append(res.Notices, fmt.Sprintf("%s: the journal says applied (%s) but %s no longer %s the patched bytes; planning it again on the files as they are",
				e.Name, e.AppliedAt.Format(time.RFC3339), strings.Join(drift, ", "), plural(len(drift), "has", "have")))
		}
		// Each plan was made on the bytes the plans before it write, and
		// the set was just compared with the disk: only a plan after one
		// skipped with changes planned (the journal had it applied) can
		// meet other bytes.
		if skipped {
			st, err := planStale(t, p)
			if err != nil {
				return fail(err)
			}
			if st {
				rest, err := PlanSet(ctx, t, s.patches()[i:], SetOptions{Strict: s.Strict})
				if err != nil {
					return fail(err)
				}
				if prob := rest.Problem(); prob != nil {
					return fail(exit.With(exit.Conflict, &ConflictError{Set: rest, Problem: prob}))
				}
				p = rest.Plans[0]
			}
		}
		if p.Outcome() == OutcomeAlreadyApplied {
			po := outcomeOf(p, "already-applied")
			po.Reason = "already applied: the tree already has every change"
			if staleEntry != nil {
				// The journal entry stays: it still has the originals
				// that revert needs.
				po.Reason += " (files changed since apply; the journal entry is kept)"
			}
			res.Patches = append(res.Patches, po)
			continue
		}
		it := &applyItem{p: p, replace: staleEntry, changes: planChanges(p)}
		for _, c := range it.changes {
			if batchWrites[c.fp.Path] {
				if err := flush(); err != nil {
					return fail(err)
				}
				break
			}
		}
		if staleEntry != nil {
			// The new entry replaces the stale one: the files written now
			// get the bytes they have now as originals; the files the
			// plan leaves alone keep their records and copies.
			var err error
			if it.carry, err = j.carryOver(staleEntry, p); err != nil {
				return fail(err)
			}
		}
		for _, c := range it.changes {
			batchWrites[c.fp.Path] = true
		}
		slots[it] = len(res.Patches)
		res.Patches = append(res.Patches, nil)
		batch = append(batch, it)
	}
	if err := flush(); err != nil {
		return fail(err)
	}
	return res, nil
}

// setWrites lists the paths the plans of s write.
func setWrites(s *Set) []string {
	var rels []string
	for _, p := range s.Plans {
		for _, c := range planChanges(p) {
			rels = append(rels, c.fp.Path)
		}
	}
	return rels
}

// hasJournal reports whether t has a journal state file.
func hasJournal(t source.WritableTree) bool {
	_, err := os.Stat(filepath.Join(t.StateDir(), "state.json"))
	return err == nil
}

// entryDrift lists the files of an applied entry that no longer have the
// bytes the patch wrote, each with what it has now ("original", "changed",
// "missing").
func entryDrift(t source.Tree, e *Entry) ([]string, error) {
	var out []string
	for _, f := range e.Files {
		h, err := hashCurrent(t, f.Path)
		if err != nil {
			return nil, err
		}
		switch {
		case h == f.Patched:
			continue
		case h == f.Original:
			out = append(out, f.Path+" (original)")
		case h == "":
			out = append(out, f.Path+" (missing)")
		default:
			out = append(out, f.Path+" (changed)")
		}
	}
	return out, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// carried is a file record of a stale entry that its replacement keeps,
// with its journal copies.
type carried struct {
	rec           *FileRecord
	orig, patched []byte
}

// carryOver reads the records (and copies) of the stale entry e that the
// plan p does not write.
func (j *journal) carryOver(e *Entry, p *Plan) ([]carried, error) {
	writes := map[string]bool{}
	for _, c := range planChanges(p) {
		writes[c.fp.Path] = true
	}
	var out []carried
	for _, f := range e.Files {
		if writes[f.Path] {
			continue
		}
		c := carried{rec: f}
		if f.Original != "" {
			b, err := j.wanted(e, f, false)
			if err != nil {
				return nil, err
			}
			c.orig = b
		}
		if f.Patched != "" {
			if b, err := j.readBlob("patched", e.Name, f.Path); err == nil {
				c.patched = b
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func outcomeOf(p *Plan, status string) *PatchOutcome {
	po := &PatchOutcome{
		Name:          p.Patch.Name,
		VariantReason: p.VariantReason,
		Version:       p.Version,
		VersionFrom:   p.VersionFrom,
		Outcome:       string(p.Outcome()),
		Status:        status,
		Files:         []*FileOutcome{},
	}
	if p.Variant != nil {
		po.Variant = p.Variant.Name
	}
	for _, fp := range p.Files {
		po.Files = append(po.Files, newFileOutcome(fp))
	}
	return po
}

// newFileOutcome is a FileOutcome with every list present (JSON arrays,
// never null).
func newFileOutcome(fp *FilePlan) *FileOutcome {
	hunks := fp.Hunks
	if hunks == nil {
		hunks = []HunkResult{}
	}
	return &FileOutcome{Path: fp.Path, Note: fp.Note, Hunks: hunks, PycRemoved: []string{}}
}

// planStale reports whether a file of p no longer has the bytes p planned on.
func planStale(t source.WritableTree, p *Plan) (bool, error) {
	for _, fp := range p.Files {
		want := fp.Old
		if fp.Create {
			want = nil
		} else if want == nil {
			want = []byte{}
		}
		same, err := sameBytes(t, fp.Path, want)
		if err != nil {
			return false, err
		}
		if !same {
			return true, nil
		}
	}
	return false, nil
}

// applyItem is one patch of a journal transaction: its plan, and the stale
// entry it replaces (with the records carried over from it), if any.
type applyItem struct {
	p       *Plan
	replace *Entry
	carry   []carried
	changes []changedFile
}

// applyBatch writes the plans of items under the journal as one
// transaction: each patch has its own entry (and its own copies), but the
// entries are recorded, the files written and the entries marked applied
// together, so the disk is waited for in four rounds however many patches
// the set has, each syncing several files at once:
//
//  1. the original copies of every patch (with their directories) and the
//     state's temporary file with every entry pending; then the state is
//     renamed into place;
//  2. the state directory (the pending entries are durable) and the
//     temporary files of the new contents; then each is renamed over its
//     target;
//  3. the target directories and the temporary file of the state with
//     every entry applied; then everything is read back and checked;
//  4. the state directory, after the applied state is renamed into place.
//
// No target changes before the pending entries and the originals are
// durable, and a process killed at any point leaves pending entries the
// next command rolls back, newest first. The patches of one transaction
// write different files (Apply starts a new transaction before a patch
// that writes a file the transaction already writes), so each entry's
// files have either their original or their patched bytes at every
// moment, and each entry rolls back on its own.
//
// An item's replace, when set, is a stale entry of the same patch: the
// pending entry takes its place in the same state write, and keeps the
// records carried over from it (files the plan does not write).
func (j *journal) applyBatch(ctx context.Context, items []*applyItem, opts ApplyOptions) ([]*Entry, []*PatchOutcome, error) {
	var rels []string
	newFiles := map[string][]byte{}
	for _, it := range items {
		for i, c := range it.changes {
			// Plans compose the diffs of one file into one file plan; two for
			// one path would journal and write it twice.
			if i > 0 && it.changes[i-1].fp.Path == c.fp.Path {
				return nil, nil, fmt.Errorf("%s: two file plans for %s; nothing was changed", it.p.Patch.Name, c.fp.Path)
			}
			if _, dup := newFiles[c.fp.Path]; dup {
				return nil, nil, fmt.Errorf("%s: %s is written by two patches of one transaction; nothing was changed", it.p.Patch.Name, c.fp.Path)
			}
			rels = append(rels, c.fp.Path)
			newFiles[c.fp.Path] = c.new
		}
	}
	if err := checkWritable(j.t, rels); err != nil {
		return nil, nil, err
	}
	now := time.Now().UTC().Truncate(time.Second)
	// 1. Originals (durable) and the bytes we will write, then the pending entries.
	bws := make([]*blobWriter, 0, len(items))
	defer func() {
		for _, bw := range bws {
			_ = bw.close()
		}
	}()
	entries := make([]*Entry, 0, len(items))
	var syncFiles []*os.File
	var syncDirs []string
	for _, it := range items {
		p := it.p
		e := &Entry{
			Name:          p.Patch.Name,
			Project:       string(p.Patch.Project),
			State:         StatePending,
			VariantReason: p.VariantReason,
			Version:       p.Version,
			VersionFrom:   p.VersionFrom,
			Origin:        p.Patch.Origin,
			PatchDigest:   p.Patch.Digest,
			CatalogDigest: opts.CatalogDigest,
			ToolVersion:   opts.ToolVersion,
			AppliedAt:     now,
			Notes:         opts.Notes,
		}
		if p.Variant != nil {
			e.Variant = p.Variant.Name
		}
		j.dropBlobs(e.Name)
		bw := j.newBlobWriter()
		bws = append(bws, bw)
		var created []string
		recorded := itemPaths(it)
		for _, c := range it.changes {
			if c.old != nil {
				if err := bw.write("orig", e.Name, c.fp.Path, c.old, true); err != nil {
					return nil, nil, fmt.Errorf("journal: %w", err)
				}
			} else if c.new != nil {
				created = append(created, c.fp.Path)
			}
			if c.new != nil {
				if err := bw.writePatched(e.Name, c.fp.Path, c.old, c.new, recorded[c.fp.Path+deltaSuffix]); err != nil {
					return nil, nil, fmt.Errorf("journal: %w", err)
				}
			}
			e.Files = append(e.Files, &FileRecord{Path: c.fp.Path, Original: sha256Hex(c.old), Patched: sha256Hex(c.new)})
		}
		e.CreatedDirs = newDirs(j.t, created)
		for _, c := range it.carry {
			if c.orig != nil {
				if err := bw.write("orig", e.Name, c.rec.Path, c.orig, true); err != nil {
					return nil, nil, fmt.Errorf("journal: %w", err)
				}
			}
			if c.patched != nil {
				if err := bw.writePatched(e.Name, c.rec.Path, c.orig, c.patched, recorded[c.rec.Path+deltaSuffix]); err != nil {
					return nil, nil, fmt.Errorf("journal: %w", err)
				}
			}
			e.Files = append(e.Files, c.rec)
		}
		if it.replace != nil {
			for _, d := range it.replace.CreatedDirs {
				if dirOfAny(d, e.Files) && !slices.Contains(e.CreatedDirs, d) {
					e.CreatedDirs = append(e.CreatedDirs, d)
				}
			}
			sort.SliceStable(e.CreatedDirs, func(i, k int) bool {
				return strings.Count(e.CreatedDirs[i], "/") > strings.Count(e.CreatedDirs[k], "/")
			})
		}
		files, dirs, err := bw.finish()
		if err != nil {
			return nil, nil, fmt.Errorf("journal: %w", err)
		}
		syncFiles = append(syncFiles, files...)
		syncDirs = appendNew(syncDirs, dirs...)
		entries = append(entries, e)
	}
	if err := hook("before-pending"); err != nil {
		return nil, nil, err
	}
	for i, it := range items {
		if it.replace != nil {
			j.state.remove(it.replace.Name)
		}
		j.state.Patches = append(j.state.Patches, entries[i])
	}
	dropPending := func(err error) ([]*Entry, []*PatchOutcome, error) {
		for i, it := range items {
			j.state.remove(entries[i].Name)
			if it.replace != nil {
				j.state.Patches = append(j.state.Patches, it.replace)
			}
		}
		for _, bw := range bws {
			_ = bw.close()
		}
		for _, e := range entries {
			j.dropBlobs(e.Name)
		}
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	pending, err := j.stageState()
	if err != nil {
		return dropPending(err)
	}
	if err := source.SyncAll(append(syncFiles, pending.f), syncDirs); err != nil {
		pending.discard()
		return dropPending(err)
	}
	for _, bw := range bws {
		if err := bw.close(); err != nil {
			pending.discard()
			return dropPending(err)
		}
	}
	if err := pending.commit(); err != nil {
		return dropPending(err)
	}
	// 2. The new contents beside their targets, synced with the pending
	// entries; then each file put in place.
	w, err := prepareTreeWrite(j.t, rels, newFiles)
	if err != nil {
		return nil, nil, j.undoAll(entries, err)
	}
	if err := w.syncTemps(nil, []string{j.dir}); err != nil {
		w.cleanup()
		return nil, nil, j.undoAll(entries, fmt.Errorf("journal: %w", err))
	}
	for i, rel := range rels {
		if err := hook(fmt.Sprintf("write:%d", i)); err != nil {
			if errors.Is(err, errCrash) {
				return nil, nil, err
			}
			w.cleanup()
			return nil, nil, j.undoAll(entries, err)
		}
		if err := ctx.Err(); err != nil {
			w.cleanup()
			return nil, nil, j.undoAll(entries, err)
		}
		if err := w.commit(i); err != nil {
			w.cleanup()
			return nil, nil, j.undoAll(entries, fmt.Errorf("writing %s: %w", rel, err))
		}
	}
	if err := hook("after-writes"); err != nil {
		if errors.Is(err, errCrash) {
			return nil, nil, err
		}
		return nil, nil, j.undoAll(entries, err)
	}
	// 3. The directories, synced with the applied state's temporary file;
	// then read back: every file has the bytes we meant, every rule holds.
	setState := func(s EntryState) {
		for _, e := range entries {
			e.State = s
		}
	}
	setState(StateApplied)
	applied, err := j.stageState()
	setState(StatePending)
	if err != nil {
		return nil, nil, j.undoAll(entries, fmt.Errorf("journal: %w", err))
	}
	if err := w.syncDirs([]*os.File{applied.f}); err != nil {
		applied.discard()
		return nil, nil, j.undoAll(entries, err)
	}
	// Every file the transaction wrote is read back first; the rules of
	// each patch then look at those bytes (the patches write different
	// files, so they are the bytes on disk for every patch's rules).
	written := map[string][]byte{}
	for _, it := range items {
		if err := readBack(j.t, it.changes); err != nil {
			applied.discard()
			return nil, nil, j.undoAll(entries, err)
		}
		for _, c := range it.changes {
			written[c.fp.Path] = c.new
		}
	}
	for _, it := range items {
		if err := checkRulesOn(j.t, it.p, written); err != nil {
			applied.discard()
			return nil, nil, j.undoAll(entries, err)
		}
	}
	// 4. Mark applied.
	if err := applied.commit(); err != nil {
		return nil, nil, j.undoAll(entries, fmt.Errorf("journal: %w", err))
	}
	setState(StateApplied)
	if err := source.SyncDir(j.dir); err != nil {
		setState(StatePending)
		return nil, nil, j.undoAll(entries, fmt.Errorf("journal: %w", err))
	}
	outs := make([]*PatchOutcome, 0, len(items))
	for k, it := range items {
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
			f.Original, f.Patched = entries[k].Files[i].Original, entries[k].Files[i].Patched
			f.PycRemoved = removePyc(j.t, c.fp.Path)
			if f.PycRemoved == nil {
				f.PycRemoved = []string{}
			}
		}
		outs = append(outs, po)
	}
	return entries, outs, nil
}

// appendNew appends each of more not already in list.
func appendNew(list []string, more ...string) []string {
	for _, m := range more {
		if !slices.Contains(list, m) {
			list = append(list, m)
		}
	}
	return list
}

// readBack re-reads every written file: it must have the bytes written.
func readBack(t source.Tree, changes []changedFile) error {
	for _, c := range changes {
		same, err := sameBytes(t, c.fp.Path, c.new)
		if err != nil {
			return fmt.Errorf("reading back %s: %w", c.fp.Path, err)
		}
		if !same {
			cur, err := readCurrent(t, c.fp.Path)
			if err != nil {
				return fmt.Errorf("reading back %s: %w", c.fp.Path, err)
			}
			return fmt.Errorf("reading back %s: sha256 %s, expected %s", c.fp.Path, shortHash(sha256Hex(cur)), shortHash(sha256Hex(c.new)))
		}
	}
	return nil
}

// checkRulesOn checks the verify rules of p's patch on the tree, with some
// files already read (path → bytes, nil for absent). A rule on a file that
// neither exists nor was part of the plan (a target that moved) is skipped.
func checkRulesOn(t source.Tree, p *Plan, read map[string][]byte) error {
	return checkRules(t, p, read, "after writing")
}

// ruleError is a verify rule that does not hold.
type ruleError struct{ msg string }

func (e *ruleError) Error() string { return e.msg }

// checkRules is checkRulesOn with the words that say when ("after
// writing", "on the result"); a rule that fails is a *ruleError.
func checkRules(t source.Tree, p *Plan, read map[string][]byte, when string) error {
	touched := map[string]bool{}
	for _, fp := range p.Files {
		touched[fp.Path] = true
	}
	ov, _ := t.(*overlay)
	for _, r := range p.Patch.Verify {
		b, ok := read[r.File]
		if !ok && ov != nil {
			// A file an earlier patch of the set writes: its bytes as
			// they are, not a copy.
			b, ok = ov.files[r.File]
		}
		if !ok {
			var err error
			if b, err = readCurrent(t, r.File); err != nil {
				return fmt.Errorf("verify %s: %w", r.File, err)
			}
		}
		if b == nil {
			if touched[r.File] {
				return &ruleError{fmt.Sprintf("verify %s: file is missing %s", r.File, when)}
			}
			continue
		}
		if r.Contains != "" && !bytes.Contains(b, []byte(r.Contains)) {
			return &ruleError{fmt.Sprintf("verify %s: does not contain %q %s", r.File, r.Contains, when)}
		}
		if r.NotContains != "" && bytes.Contains(b, []byte(r.NotContains)) {
			return &ruleError{fmt.Sprintf("verify %s: still contains %q %s", r.File, r.NotContains, when)}
		}
	}
	return nil
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	if h == "" {
		return "(absent)"
	}
	return h
}

// undoAll rolls the pending entries of one transaction back after err,
// newest first, and returns err.
func (j *journal) undoAll(entries []*Entry, err error) error {
	for i := len(entries) - 1; i >= 0; i-- {
		if rerr := j.rollback(entries[i]); rerr != nil {
			return fmt.Errorf("%w; rolling back failed: %v (the journal keeps the entry; the next smpatch command retries)", err, rerr)
		}
	}
	return err
}

// rollback restores e's originals and removes the entry.
func (j *journal) rollback(e *Entry) error {
	e.State = StatePending
	if err := j.save(); err != nil {
		return err
	}
	if err := j.restore(e, false); err != nil {
		return err
	}
	j.state.remove(e.Name)
	if err := j.save(); err != nil {
		return err
	}
	j.dropBlobs(e.Name)
	return nil
}

// ConflictReport renders the conflicting hunks of a plan for people: each
// with its file, header, reason and the nearest region found.
func ConflictReport(p *Plan) string {
	var b strings.Builder
	for _, fp := range p.Files {
		for _, h := range fp.Hunks {
			if h.Status != Conflict {
				continue
			}
			hdr := ""
			if fp.Diff != nil && h.Index < len(fp.Diff.Hunks) && fp.Diff.Hunks[h.Index] != nil {
				hk := fp.Diff.Hunks[h.Index]
				hdr = fmt.Sprintf(" @@ -%d,%d +%d,%d @@%s", hk.OldStart, hk.OldLines, hk.NewStart, hk.NewLines, displayLine(hk.Section))
			}
			fmt.Fprintf(&b, "conflict: %s hunk #%d%s\n", fp.Path, h.Index+1, hdr)
			if h.Reason != "" {
				fmt.Fprintf(&b, "  %s\n", h.Reason)
			}
			if h.Nearest != nil {
				fmt.Fprintf(&b, "  nearest region: lines %d-%d\n", h.Nearest.Start, h.Nearest.End)
				for _, l := range strings.Split(strings.TrimRight(h.Nearest.Text, "\n"), "\n") {
					fmt.Fprintf(&b, "    | %s\n", displayLine(l))
				}
			}
		}
	}
	return b.String()
}

// displayLine makes one line of a file safe to print on a terminal: tabs
// and printable characters stay, anything else (control characters, bytes
// that are not UTF-8) is escaped as Go quotes it (\x1b, \r, \xff).
func displayLine(l string) string {
	clean := true
	for _, r := range l {
		if r == utf8.RuneError || (r != '\t' && !unicode.IsPrint(r)) {
			clean = false
			break
		}
	}
	if clean {
		return l
	}
	var b strings.Builder
	for i := 0; i < len(l); {
		r, n := utf8.DecodeRuneInString(l[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, "\\x%02x", l[i])
		case r == '\t' || (unicode.IsPrint(r) && r != utf8.RuneError):
			b.WriteString(l[i : i+n])
		default:
			q := strconv.QuoteRune(r) // 'x' with escapes inside
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}

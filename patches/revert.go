package patches

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/patches/udiff"
	"github.com/smpatch/smpatch/source"
)

// RevertOptions steer Revert.
type RevertOptions struct {
	// Force reverse-applies only the patch's own hunks to files changed
	// since apply, keeping the other edits.
	Force bool
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
	// (refused: changed since apply).
	State string `json:"state"`
	// Diff shows, for a changed file, what changed since apply
	// (patched → current).
	Diff       string   `json:"diff"`
	PycRemoved []string `json:"pyc_removed"`
}

// DriftError is a refused revert: a patched file changed since it was
// applied. Result holds the difference of every such file.
type DriftError struct {
	Result *RevertResult
	Msg    string
}

func (e *DriftError) Error() string { return e.Msg }

type revertStep struct {
	e       *Entry
	out     *RevertOutcome
	targets map[string][]byte // path -> bytes to write (nil value: delete)
	write   []string          // paths to write, in order
	forced  map[string]bool
	before  map[string]string // path -> hash of a forced file before the revert
}

// Revert restores the original bytes of the named applied patches (every
// applied patch, newest first, when names is empty). A file changed since
// apply makes it refuse with exit.RevertRefused and nothing written, unless
// opts.Force. A name that is in neither the journal nor the catalog is an
// error with a did-you-mean; a known patch that is not applied is listed in
// NotApplied.
func Revert(ctx context.Context, t source.WritableTree, cat *Catalog, names []string, opts RevertOptions) (*RevertResult, error) {
	res := &RevertResult{Tree: t.Root(), Kind: string(t.Kind()), Recovered: []string{}, Patches: []*RevertOutcome{}, NotApplied: []string{}}
	// Without a journal there is nothing to lock or revert (the journal
	// itself is read, and checked, once locked).
	exists, err := lstatStateDir(t.StateDir())
	if err != nil {
		return res, err
	}
	if _, err := os.Lstat(filepath.Join(t.StateDir(), journalStateJSON)); !exists || err != nil {
		for _, n := range names {
			if cat != nil {
				if _, err := cat.Get(n); err != nil {
					return res, err
				}
			}
			res.NotApplied = append(res.NotApplied, n)
		}
		return res, nil
	}
	j, err := openJournal(ctx, t)
	if err != nil {
		return res, err
	}
	defer j.close()
	if res.Recovered, err = j.recover(); err != nil {
		return res, err
	}
	if res.Recovered == nil {
		res.Recovered = []string{}
	}
	// Select, newest first.
	want := map[string]bool{}
	for _, n := range names {
		if e := j.state.Get(n); e != nil {
			want[n] = true
			continue
		}
		if cat != nil {
			if _, err := cat.Get(n); err != nil {
				return res, err
			}
		}
		res.NotApplied = append(res.NotApplied, n)
	}
	var sel []*Entry
	for i := len(j.state.Patches) - 1; i >= 0; i-- {
		e := j.state.Patches[i]
		if len(names) == 0 || want[e.Name] {
			sel = append(sel, e)
		}
	}
	if err := neededBy(j.state, cat, sel); err != nil {
		return res, err
	}
	// Work out every file's bytes first, on an overlay, so a refusal
	// writes nothing.
	overlay := map[string][]byte{}
	have := map[string]bool{}
	cur := func(p string) ([]byte, error) {
		if have[p] {
			return overlay[p], nil
		}
		b, err := readCurrent(t, p)
		if err != nil {
			return nil, err
		}
		overlay[p], have[p] = b, true
		return b, nil
	}
	// A file on disk is only hashed (through a small buffer) unless it
	// changed since apply and its bytes are needed.
	diskHash := map[string]string{}
	curHash := func(p string) (string, error) {
		if have[p] {
			return sha256Hex(overlay[p]), nil
		}
		if h, ok := diskHash[p]; ok {
			return h, nil
		}
		h, err := hashCurrent(t, p)
		if err != nil {
			return "", err
		}
		diskHash[p] = h
		return h, nil
	}
	var steps []*revertStep
	refused := 0
	for _, e := range sel {
		st := &revertStep{e: e, out: &RevertOutcome{Name: e.Name, Status: "reverted", Files: []*RevertFile{}}, targets: map[string][]byte{}, forced: map[string]bool{}, before: map[string]string{}}
		for _, f := range e.Files {
			h, err := curHash(f.Path)
			if err != nil {
				return res, err
			}
			rf := &RevertFile{Path: f.Path, PycRemoved: []string{}}
			st.out.Files = append(st.out.Files, rf)
			switch {
			case h == f.Patched:
				orig, err := j.wanted(e, f, false)
				if err != nil {
					return res, err
				}
				rf.State = "restored"
				st.targets[f.Path] = orig
				st.write = append(st.write, f.Path)
				overlay[f.Path], have[f.Path] = orig, true
			case h == f.Original:
				rf.State = "already-original"
			default:
				c, err := cur(f.Path)
				if err != nil {
					return res, err
				}
				patched, perr := j.readBlob("patched", e.Name, f.Path)
				if perr != nil && f.Patched != "" {
					patched = nil
				}
				rf.Diff = string(udiff.Between(f.Path, patched, c))
				if !opts.Force {
					rf.State = "changed"
					st.out.Status = "refused"
					refused++
					continue
				}
				orig, err := j.wanted(e, f, false)
				if err != nil {
					return res, err
				}
				nb, err := reverseApply(f.Path, orig, patched, c)
				if err != nil {
					return res, exit.With(exit.RevertRefused, fmt.Errorf("revert --force %s: %w", e.Name, err))
				}
				rf.State = "forced"
				st.targets[f.Path] = nb
				st.forced[f.Path] = true
				st.before[f.Path] = sha256Hex(c)
				st.write = append(st.write, f.Path)
				overlay[f.Path] = nb
			}
		}
		steps = append(steps, st)
		res.Patches = append(res.Patches, st.out)
	}
	if refused > 0 {
		var changed []string
		for _, st := range steps {
			for _, f := range st.out.Files {
				if f.State == "changed" {
					changed = append(changed, f.Path)
				}
			}
		}
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
		msg := fmt.Sprintf("revert refused: %s changed since the patch was applied (--force reverse-applies only the patch's hunks and keeps the other edits)", strings.Join(changed, ", "))
		return res, exit.With(exit.RevertRefused, &DriftError{Result: res, Msg: msg})
	}
	var paths []string
	for _, st := range steps {
		paths = append(paths, st.write...)
	}
	if err := checkWritable(t, paths); err != nil {
		return res, err
	}
	// One transaction for the steps that write different files; a step
	// that writes a file the transaction already writes starts the next.
	var batch []*revertStep
	writes := map[string]bool{}
	for _, st := range steps {
		for _, p := range st.write {
			if writes[p] {
				if err := j.revertBatch(ctx, batch); err != nil {
					return res, err
				}
				batch, writes = nil, map[string]bool{}
				break
			}
		}
		for _, p := range st.write {
			writes[p] = true
		}
		batch = append(batch, st)
	}
	if err := j.revertBatch(ctx, batch); err != nil {
		return res, err
	}
	return res, nil
}

// revertBatch writes the targets of steps (entries that write different
// files) under the journal as one transaction: the entries are marked
// reverting (with forced targets saved first), each file written, then the
// entries removed. As in apply, the disk is waited for in rounds that sync
// several files at once: the forced targets with the reverting state's
// temporary file; the state directory with the new contents' temporary
// files; the target directories; and the state directory once more when
// the entries are gone. When nothing stays applied, state.json is removed
// instead of rewritten, before any journal copy is dropped.
func (j *journal) revertBatch(ctx context.Context, steps []*revertStep) error {
	if len(steps) == 0 {
		return nil
	}
	var bws []*blobWriter
	defer func() {
		for _, bw := range bws {
			_ = bw.close()
		}
	}()
	var syncFiles []*os.File
	var syncDirs, write []string
	targets := map[string][]byte{}
	for _, st := range steps {
		e := st.e
		bw := j.newBlobWriter()
		bws = append(bws, bw)
		for p := range st.forced {
			if b := st.targets[p]; b != nil {
				if err := bw.write("target", e.Name, p, b, true); err != nil {
					return fmt.Errorf("journal: %w", err)
				}
			} else if err := bw.write("target", e.Name, p+".deleted", []byte{}, true); err != nil {
				return fmt.Errorf("journal: %w", err)
			}
		}
		files, dirs, err := bw.finish()
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		syncFiles = append(syncFiles, files...)
		syncDirs = appendNew(syncDirs, dirs...)
		for _, p := range st.write {
			write = append(write, p)
			targets[p] = st.targets[p]
		}
	}
	// The forced targets are recorded by hash, with the bytes each file
	// has now: finishing an interrupted revert writes only proved bytes,
	// and only over a file the revert could have left.
	for _, st := range steps {
		for _, f := range st.e.Files {
			if st.forced[f.Path] {
				f.Before = st.before[f.Path]
				if b := st.targets[f.Path]; b != nil {
					f.Target = sha256Hex(b)
				} else {
					f.TargetDelete = true
				}
			}
		}
		st.e.State = StateReverting
	}
	reverting, err := j.stageState()
	if err == nil {
		if err = source.SyncAll(append(syncFiles, reverting.f), syncDirs); err == nil {
			for _, bw := range bws {
				if cerr := bw.close(); cerr != nil && err == nil {
					err = cerr
				}
			}
		}
		if err != nil {
			reverting.discard()
		} else {
			err = reverting.commit()
		}
	}
	if err != nil {
		for _, st := range steps {
			st.e.State = StateApplied
			for _, f := range st.e.Files {
				f.Target, f.TargetDelete, f.Before = "", false, ""
			}
		}
		return fmt.Errorf("journal: %w", err)
	}
	w, err := prepareTreeWrite(j.t, write, targets)
	if err != nil {
		return fmt.Errorf("%w (the journal keeps the revert in flight; the next smpatch command finishes it)", err)
	}
	if err := w.syncTemps(nil, []string{j.dir}); err != nil {
		w.cleanup()
		return fmt.Errorf("journal: %w", err)
	}
	for i, p := range write {
		if err := hook(fmt.Sprintf("revert-write:%d", i)); err != nil {
			if !errors.Is(err, errCrash) {
				w.cleanup()
			}
			return err // the entries stay "reverting": the next command finishes them
		}
		if err := ctx.Err(); err != nil {
			w.cleanup()
			return err
		}
		if err := w.commit(i); err != nil {
			w.cleanup()
			return fmt.Errorf("writing %s: %w (the journal keeps the revert in flight; the next smpatch command finishes it)", p, err)
		}
	}
	if err := w.syncDirs(nil); err != nil {
		return err
	}
	for _, p := range write {
		same, err := sameBytes(j.t, p, targets[p])
		if err != nil {
			return err
		}
		if !same {
			return fmt.Errorf("reading back %s: not the bytes written", p)
		}
	}
	for _, st := range steps {
		for _, f := range st.out.Files {
			for _, p := range st.write {
				if p == f.Path {
					if pyc := removePyc(j.t, p); pyc != nil {
						f.PycRemoved = pyc
					}
				}
			}
		}
		removeCreatedDirs(j.t, st.e)
		j.state.remove(st.e.Name)
	}
	if len(j.state.Patches) == 0 {
		// Nothing stays applied: the journal goes (close removes the
		// directory). state.json goes first, durably, so no entry ever
		// names a copy that is gone.
		if err := os.Remove(j.statePath()); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		if err := source.SyncDir(j.dir); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
	} else if err := j.save(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	for _, st := range steps {
		j.dropBlobs(st.e.Name)
	}
	return nil
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
func neededBy(st *State, cat *Catalog, sel []*Entry) error {
	if cat == nil {
		return nil
	}
	going := map[string]bool{}
	for _, e := range sel {
		going[e.Name] = true
	}
	for _, e := range st.Patches {
		if going[e.Name] || e.State != StateApplied {
			continue
		}
		p, ok := cat.Lookup(e.Name)
		if !ok {
			continue
		}
		for _, n := range p.Needs {
			if going[n] {
				return exit.With(exit.RevertRefused, fmt.Errorf("%s is applied and needs %s: revert %s first, or both: smpatch revert %s %s; nothing was changed", e.Name, n, e.Name, e.Name, n))
			}
		}
	}
	return nil
}

package journal

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
)

// RevertStep is one entry of a revert transaction.
type RevertStep struct {
	Entry *Entry
	// Writes are the files to write: Old the bytes each has now, New the
	// bytes it gets (nil: removed).
	Writes []Write
	// Forced are the paths of Writes whose new bytes are not the original
	// ones: the patch's hunks taken back out of a file edited since.
	Forced map[string]bool
	// PycRemoved and PycRestored are filled by Revert: per path written,
	// the bytecode it removed (compiled from the patched bytes) and the
	// bytecode it put back (what apply removed, beside the original).
	PycRemoved, PycRestored map[string][]string
}

// Revert writes steps (entries that write different files) as one journal
// transaction: the entries are marked reverting, with the bytes a forced
// revert writes kept first (synced) and recorded by hash; then every file
// is written (temp + fsync + rename) and the directories synced; then the
// entries are removed (state.json itself when nothing stays applied,
// before any copy is dropped).
//
// Once the first file is put in place the revert is past its point of no
// return: it is finished whatever ctx says (finishing is also what the
// next command does after a kill). Before that, ctx ending puts the
// entries back as they were (a *StoppedError: nothing was changed).
func (j *Journal) Revert(ctx context.Context, steps []*RevertStep) error {
	if len(steps) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return &StoppedError{What: "stopped before writing: nothing was changed", Err: err}
	}
	var rels []string
	files := map[string][]byte{}
	for _, st := range steps {
		for _, w := range st.Writes {
			if _, dup := files[w.Path]; dup {
				return fmt.Errorf("%s: %s is written twice in one transaction; nothing was changed", st.Entry.Name, w.Path)
			}
			rels = append(rels, w.Path)
			files[w.Path] = w.New
		}
	}
	if err := j.t.CheckWrites(rels); err != nil {
		return err
	}
	if err := j.markReverting(steps); err != nil {
		return err
	}
	pw, err := j.t.PrepareWrites(rels, files)
	if err == nil && ctx.Err() != nil {
		pw.Close()
		err = &StoppedError{What: "stopped before writing: nothing was changed", Err: ctx.Err()}
	}
	if err != nil {
		if uerr := j.unmarkReverting(steps); uerr != nil {
			return fmt.Errorf("%w (and putting the journal back failed: %v; the next smpatch command finishes the revert)", err, uerr)
		}
		return err
	}
	defer pw.Close()
	for i := range rels {
		if err := hook(fmt.Sprintf("revert-write:%d", i)); err != nil {
			return err // the entries stay "reverting": the next command finishes them
		}
		if err := pw.Commit(i); err != nil {
			return fmt.Errorf("%w (the journal keeps the revert in flight; the next smpatch command finishes it)", err)
		}
	}
	if err := pw.SyncDirs(); err != nil {
		return err
	}
	for _, p := range rels {
		cur, err := ReadCurrent(j.t, p)
		if err != nil {
			return err
		}
		if want := files[p]; !bytes.Equal(cur, want) || (cur == nil) != (want == nil) {
			return fmt.Errorf("reading back %s: not the bytes written (the journal keeps the revert in flight; the next smpatch command finishes it)", p)
		}
	}
	for _, st := range steps {
		st.PycRemoved, st.PycRestored = map[string][]string{}, map[string][]string{}
		for _, w := range st.Writes {
			if f := st.Entry.file(w.Path); f != nil && !st.Forced[w.Path] {
				st.PycRemoved[w.Path], st.PycRestored[w.Path] = j.restoreBytecode(st.Entry, f)
			} else {
				st.PycRemoved[w.Path] = RemovePyc(j.t, w.Path)
			}
		}
	}
	var names []string
	for _, st := range steps {
		removeCreatedDirs(j.t, st.Entry)
		j.state.remove(st.Entry.Name)
		names = append(names, st.Entry.Name)
	}
	if len(j.state.Patches) == 0 {
		err = j.dropState()
	} else {
		err = j.save()
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		j.dropCopies(n)
	}
	return nil
}

// markReverting records the entries of steps reverting, durably, with the
// bytes of each forced file kept (target copies, synced) and recorded by
// hash beside the bytes the file has now: finishing an interrupted revert
// writes only proved bytes, and only over a file the revert could have
// left.
func (j *Journal) markReverting(steps []*RevertStep) error {
	for _, st := range steps {
		e := st.Entry
		targets := map[string][]byte{}
		var order []string
		for _, w := range st.Writes {
			if !st.Forced[w.Path] {
				continue
			}
			f := e.file(w.Path)
			if f == nil {
				return fmt.Errorf("%s: no record of %s", e.Name, w.Path)
			}
			f.Before = Hash(w.Old)
			if w.New == nil {
				f.TargetDelete = true
				targets[w.Path+".deleted"] = []byte{}
				order = append(order, w.Path+".deleted")
			} else {
				f.Target = Hash(w.New)
				targets[w.Path] = w.New
				order = append(order, w.Path)
			}
		}
		sort.Strings(order)
		if err := j.writeCopies(kindTarget, e.Name, order, targets, true); err != nil {
			j.clearTargets(steps)
			return err
		}
		e.State = Reverting
	}
	if err := j.save(); err != nil {
		j.clearTargets(steps)
		return err
	}
	return nil
}

// clearTargets puts the entries of steps back as they were before
// markReverting, in memory, and drops their target copies.
func (j *Journal) clearTargets(steps []*RevertStep) {
	for _, st := range steps {
		st.Entry.State = Applied
		for _, f := range st.Entry.Files {
			f.Target, f.TargetDelete, f.Before = "", false, ""
		}
		_ = os.Remove(j.tarPath(kindTarget, st.Entry.Name))
		delete(j.copies, kindTarget+"/"+st.Entry.Name)
	}
}

// unmarkReverting undoes markReverting, durably: no file was written.
func (j *Journal) unmarkReverting(steps []*RevertStep) error {
	for _, st := range steps {
		st.Entry.State = Applied
		for _, f := range st.Entry.Files {
			f.Target, f.TargetDelete, f.Before = "", false, ""
		}
	}
	if err := j.save(); err != nil {
		return err
	}
	j.clearTargets(steps)
	return nil
}

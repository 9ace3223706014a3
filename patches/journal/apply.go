package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/smpatch/smpatch/internal/words"
)

// Hook, when set, is called at each step of a transaction ("before-pending",
// "write:N", "after-writes", "revert-write:N"); when it returns ErrCrash
// the transaction stops where it is, without any clean-up, as a killed
// process would. Tests set it; programs leave it nil.
var Hook func(step string) error

// ErrCrash is what Hook returns to stop a transaction as a kill would.
var ErrCrash = errors.New("simulated crash")

func hook(step string) error {
	if Hook == nil {
		return nil
	}
	return Hook(step)
}

// Item is one patch of an apply transaction.
type Item struct {
	// Entry is the patch's entry as it is to be recorded: its name and
	// what says which patch it is. Apply sets its state, time, files and
	// created directories.
	Entry *Entry
	// Writes are the files the patch writes: Old the bytes the file has
	// (nil: the patch creates it), New the bytes it gets (nil: removed).
	Writes []Write
	// Kept are records of the stale entry this one replaces that the
	// patch leaves alone, with their copies.
	Kept []Kept
	// Replaces is the stale entry of the same patch this one replaces.
	Replaces *Entry
}

// Write is one file a patch writes.
type Write struct {
	Path     string
	Old, New []byte
}

// Kept is a file record an entry keeps from the one it replaces, with
// its copies (nil: none).
type Kept struct {
	Record        *FileRecord
	Orig, Patched []byte
}

// Apply writes items as one journal transaction: each patch has its own
// entry and its own copies, but the entries are recorded pending together,
// the files written together and the entries marked applied together.
// The patches write different files, so each entry's files have their
// original or their patched bytes at every moment, and each entry rolls
// back on its own.
//
//  1. The original copies of every patch are written and synced, then the
//     state with every entry pending (durable before any tree file changes).
//  2. Every new content is written beside its target; then each is synced
//     and renamed over it, and the directories are synced.
//  3. check (when set) looks at what was written; then the state with
//     every entry applied is written: the point of no return.
//
// A process killed at any moment leaves pending entries that the next
// command rolls back. Any failure, and ctx ending, before step 3 rolls
// every file back to its original bytes and drops the entries; a stop by
// ctx is a *StoppedError saying so.
func (j *Journal) Apply(ctx context.Context, items []*Item, check func() error) error {
	if err := ctx.Err(); err != nil {
		return &StoppedError{What: "stopped before writing: nothing was changed", Err: err}
	}
	var rels []string
	files := map[string][]byte{}
	for _, it := range items {
		for _, w := range it.Writes {
			if _, dup := files[w.Path]; dup {
				return fmt.Errorf("%s: %s is written twice in one transaction; nothing was changed", it.Entry.Name, w.Path)
			}
			rels = append(rels, w.Path)
			files[w.Path] = w.New
		}
	}
	if err := j.t.CheckWrites(rels); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	entries := make([]*Entry, len(items))
	for i, it := range items {
		e, err := j.recordItem(it, now)
		if err != nil {
			for _, e := range entries[:i] {
				j.dropCopies(e.Name)
			}
			return err
		}
		entries[i] = e
	}
	if err := hook("before-pending"); err != nil {
		return err
	}
	for i, it := range items {
		if it.Replaces != nil {
			j.state.remove(it.Replaces.Name)
		}
		j.state.Patches = append(j.state.Patches, entries[i])
	}
	if err := j.save(); err != nil {
		for i, it := range items {
			j.state.remove(entries[i].Name)
			if it.Replaces != nil {
				j.state.Patches = append(j.state.Patches, it.Replaces)
			}
			j.dropCopies(entries[i].Name)
		}
		return err
	}
	written, err := j.writeAll(ctx, rels, files, "write")
	if errors.Is(err, ErrCrash) {
		return err
	}
	if err == nil {
		err = hook("after-writes")
		if errors.Is(err, ErrCrash) {
			return err
		}
	}
	if err == nil && check != nil {
		err = check()
	}
	if err == nil {
		for _, e := range entries {
			e.State = Applied
		}
		if err = j.save(); err != nil {
			for _, e := range entries {
				e.State = Pending
			}
		}
	}
	if err != nil {
		return j.rollBack(entries, written, err)
	}
	return nil
}

// recordItem makes the pending entry of it and writes its copies: the
// originals synced, the patched bytes not (they are never needed to
// restore a file).
func (j *Journal) recordItem(it *Item, now time.Time) (*Entry, error) {
	e := it.Entry
	e.State, e.AppliedAt, e.Files, e.CreatedDirs = Pending, now, nil, nil
	j.dropCopies(e.Name)
	orig, patched, bytecode := map[string][]byte{}, map[string][]byte{}, map[string][]byte{}
	var origOrder, patchedOrder, bytecodeOrder, created []string
	add := func(rec *FileRecord, o, p []byte) {
		e.Files = append(e.Files, rec)
		if o != nil {
			orig[rec.Path] = o
			origOrder = append(origOrder, rec.Path)
		}
		if p != nil {
			patched[rec.Path] = p
			patchedOrder = append(patchedOrder, rec.Path)
		}
	}
	for _, w := range it.Writes {
		rec := &FileRecord{Path: w.Path, Original: Hash(w.Old), Patched: Hash(w.New)}
		order, pycs := recordBytecode(j.t, rec, w.Old)
		for _, p := range order {
			bytecode[p] = pycs[p]
		}
		bytecodeOrder = append(bytecodeOrder, order...)
		add(rec, w.Old, w.New)
		if w.Old == nil && w.New != nil {
			created = append(created, w.Path)
		}
	}
	e.CreatedDirs = NewDirs(j.t, created)
	for _, k := range it.Kept {
		// The kept file was not written again: its bytecode was removed
		// by the apply that made the stale entry, and no copy is kept now.
		k.Record.Bytecode = nil
		add(k.Record, k.Orig, k.Patched)
	}
	if it.Replaces != nil {
		e.CreatedDirs = mergeDirs(e.CreatedDirs, it.Replaces.CreatedDirs, e.Files)
	}
	if msg := checkFiles(e); msg != "" {
		return nil, fmt.Errorf("%s: %s; nothing was changed", e.Name, msg)
	}
	if err := j.writeCopies(kindOrig, e.Name, origOrder, orig, true); err != nil {
		return nil, err
	}
	if err := j.writeCopies(kindPatched, e.Name, patchedOrder, patched, false); err != nil {
		j.dropCopies(e.Name)
		return nil, err
	}
	if err := j.writeCopies(kindBytecode, e.Name, bytecodeOrder, bytecode, false); err != nil {
		j.dropCopies(e.Name)
		return nil, err
	}
	return e, nil
}

// writeAll writes files to the tree in the order of rels: each new content
// beside its target first, then each put in place, then the directories
// synced. Before each file is put in place ctx is looked at: once it has
// ended nothing more is written. It returns how many files it put in
// place.
func (j *Journal) writeAll(ctx context.Context, rels []string, files map[string][]byte, step string) (int, error) {
	pw, err := j.t.PrepareWrites(rels, files)
	if err != nil {
		return 0, err
	}
	for i := range rels {
		if err := hook(fmt.Sprintf("%s:%d", step, i)); err != nil {
			if !errors.Is(err, ErrCrash) {
				pw.Close()
			}
			return i, err
		}
		if err := ctx.Err(); err != nil {
			pw.Close()
			return i, err
		}
		if err := pw.Commit(i); err != nil {
			pw.Close()
			return i, err
		}
	}
	defer pw.Close()
	return len(rels), pw.SyncDirs()
}

// rollBack rolls the pending entries of one transaction back after err,
// newest first, and returns err; written is how many tree files the
// transaction had put in place. A stop by the context says what it left.
func (j *Journal) rollBack(entries []*Entry, written int, err error) error {
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		rerr := j.restore(e, false)
		if rerr == nil {
			rerr = j.forget(e.Name)
		}
		if rerr != nil {
			return fmt.Errorf("%w; rolling back failed: %v (the journal keeps the entry; the next smpatch command retries)", err, rerr)
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if written == 0 {
			return &StoppedError{What: "stopped before writing: nothing was changed", Err: err}
		}
		return &StoppedError{What: fmt.Sprintf("stopped: the %d %s written so far %s restored; nothing changed", written, words.Plural(written, "file", "files"), words.Plural(written, "was", "were")), Err: err}
	}
	return err
}

// Undo rolls the entry e, applied by this command, back: it is marked
// pending (durably: a kill from here on is rolled back by the next
// command), its files get their original bytes, and it is removed.
func (j *Journal) Undo(e *Entry) error {
	e.State = Pending
	if err := j.save(); err != nil {
		return err
	}
	if err := j.restore(e, false); err != nil {
		return err
	}
	return j.forget(e.Name)
}

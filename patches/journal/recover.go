package journal

import (
	"bytes"
	"context"
	"fmt"

	"github.com/smpatch/smpatch/source"
)

// Entries in flight. A command killed in the middle of an apply leaves
// pending entries, in the middle of a revert reverting ones. Every command
// that writes finishes them first (Recover), the safe way: a pending apply
// is rolled back to the originals, an interrupted revert is completed.
// Commands that only read report them (Interrupted) and write nothing.

// Recover finishes every entry in flight, newest first (one apply records
// the entries of its patches together, and each is rolled back before
// those it was planned on), and returns one line per entry for people.
// A file edited since the interrupted command makes it refuse
// (EditedError), nothing written.
func (j *Journal) Recover() ([]string, error) {
	var notes []string
	ents := append([]*Entry(nil), j.state.Patches...)
	for i := len(ents) - 1; i >= 0; i-- {
		e := ents[i]
		switch e.State {
		case Applied:
			continue
		case Pending:
			if err := j.restore(e, false); err != nil {
				return notes, fmt.Errorf("rolling back the interrupted apply of %s: %w", e.Name, err)
			}
			notes = append(notes, fmt.Sprintf("rolled back an interrupted apply of %s (%d files restored to their originals)", e.Name, len(e.Files)))
		case Reverting:
			if err := j.restore(e, true); err != nil {
				return notes, fmt.Errorf("finishing the interrupted revert of %s: %w", e.Name, err)
			}
			notes = append(notes, fmt.Sprintf("finished an interrupted revert of %s", e.Name))
		}
		if err := j.forget(e.Name); err != nil {
			return notes, err
		}
	}
	j.dropOrphans()
	return notes, nil
}

// forget removes the entry name from the state, durably (state.json goes
// when nothing is left), then its copies.
func (j *Journal) forget(name string) error {
	j.state.remove(name)
	var err error
	if len(j.state.Patches) == 0 {
		err = j.dropState()
	} else {
		err = j.save()
	}
	if err != nil {
		return err
	}
	j.dropCopies(name)
	return nil
}

// restore writes back, for every file of e, the original bytes (or, for a
// revert, the target it recorded). A file that already has them is left
// alone, and its journal copy is not even needed. Every file must have
// bytes the interrupted command could have left (its original or patched
// bytes; for a revert also the target and the bytes before it): a file
// edited since makes it refuse (EditedError), nothing written.
func (j *Journal) restore(e *Entry, revert bool) error {
	op := "apply"
	if revert {
		op = "revert"
	}
	var edited []string
	for _, f := range e.Files {
		cleanTemps(j.t, f.Path)
		h, other, err := Look(j.t, f.Path)
		if err != nil {
			return err
		}
		switch {
		case other != "":
			edited = append(edited, f.Path+" ("+other+")")
		case !couldLeave(f, h, revert):
			edited = append(edited, f.Path)
		}
	}
	if len(edited) > 0 {
		return &EditedError{Entry: e.Name, Op: op, Files: edited}
	}
	files := map[string][]byte{}
	var order []string
	for _, f := range e.Files {
		cur, err := ReadCurrent(j.t, f.Path)
		if err != nil {
			return err
		}
		forced := revert && (f.Target != "" || f.TargetDelete)
		if !forced && isOriginal(cur, f) {
			continue
		}
		var want []byte
		if forced {
			want, err = j.target(e, f)
		} else {
			want, err = j.Original(e, f)
		}
		if err != nil {
			return err
		}
		if bytes.Equal(cur, want) && (cur == nil) == (want == nil) {
			continue
		}
		files[f.Path] = want
		order = append(order, f.Path)
	}
	if err := writeTree(j.t, order, files); err != nil {
		return err
	}
	for _, p := range order {
		if f := e.file(p); f != nil && !(revert && (f.Target != "" || f.TargetDelete)) {
			j.restoreBytecode(e, f)
		} else {
			RemovePyc(j.t, p)
		}
	}
	removeCreatedDirs(j.t, e)
	return nil
}

// couldLeave reports whether a file of hash h has bytes the interrupted
// apply (or, with revert, revert) of f's entry could have left.
func couldLeave(f *FileRecord, h string, revert bool) bool {
	if h == f.Original || h == f.Patched {
		return true
	}
	return revert && ((f.Target != "" && h == f.Target) || (f.Before != "" && h == f.Before) || (f.TargetDelete && h == ""))
}

// isOriginal reports whether cur is the original content of f (absent
// when the patch created it).
func isOriginal(cur []byte, f *FileRecord) bool {
	if f.Original == "" {
		return cur == nil
	}
	return cur != nil && Hash(cur) == f.Original
}

// writeTree writes files (nil: removes) in order, each by temp + fsync +
// rename, then syncs the directories that changed.
func writeTree(t source.WritableTree, order []string, files map[string][]byte) error {
	if len(order) == 0 {
		return nil
	}
	pw, err := t.PrepareWrites(order, files)
	if err != nil {
		return err
	}
	defer pw.Close()
	for i := range order {
		if err := pw.Commit(i); err != nil {
			return err
		}
	}
	return pw.SyncDirs()
}

// Interrupted is an entry in flight, as a command that only reads reports
// it: what was interrupted, how far it got, and what finishes it.
type Interrupted struct {
	Name string `json:"name"`
	// Operation is "apply" or "revert".
	Operation string `json:"operation"`
	// Files is how many files the entry records; Done how many of them
	// have the bytes the operation meant to leave (written, restored).
	Files int `json:"files"`
	Done  int `json:"done"`
	// Edited are the files that have neither: edited since.
	Edited []string `json:"edited"`
	// Finish says what the next writing command does about it.
	Finish string `json:"finish"`
}

// String is the report of the entry, one line.
func (in *Interrupted) String() string {
	verb := "written"
	if in.Operation == "revert" {
		verb = "restored"
	}
	return fmt.Sprintf("interrupted %s of %s (%d of %d files %s): %s", in.Operation, in.Name, in.Done, in.Files, verb, in.Finish)
}

// Interrupted reports every entry in flight, newest first, reading the
// tree's files and writing nothing.
func (j *Journal) Interrupted() ([]*Interrupted, error) {
	var out []*Interrupted
	for i := len(j.state.Patches) - 1; i >= 0; i-- {
		e := j.state.Patches[i]
		if e.State == Applied {
			continue
		}
		revert := e.State == Reverting
		in := &Interrupted{Name: e.Name, Operation: "apply", Files: len(e.Files), Edited: []string{}}
		if revert {
			in.Operation = "revert"
		}
		for _, f := range e.Files {
			h, other, err := Look(j.t, f.Path)
			if err != nil {
				return nil, err
			}
			switch {
			case other != "":
				in.Edited = append(in.Edited, f.Path+" ("+other+")")
			case !couldLeave(f, h, revert):
				in.Edited = append(in.Edited, f.Path)
			case !revert && h == f.Patched && h != f.Original:
				in.Done++
			case revert && ((f.Target != "" && h == f.Target) || (f.TargetDelete && h == "") || (f.Target == "" && !f.TargetDelete && h == f.Original)):
				in.Done++
			}
		}
		switch {
		case len(in.Edited) > 0:
			in.Finish = fmt.Sprintf("%s changed since, so the next apply or revert refuses; `smpatch journal forget %s` keeps the tree as it is", in.Edited[0], e.Name)
		case revert:
			in.Finish = "`smpatch revert` finishes it"
		default:
			in.Finish = "`smpatch revert` rolls it back (so does the next apply, before it writes)"
		}
		out = append(out, in)
	}
	return out, nil
}

// Forget drops the journal entry called name and its copies, writing no
// tree file: the files stay as they are now. It is the way out when an
// entry cannot be rolled back or reverted (the files were edited since,
// or the copies are lost) and the user keeps the tree as it is.
func Forget(ctx context.Context, t source.WritableTree, name string, opts Options) (*Entry, error) {
	ok, err := Exists(t)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s: no journal", t.StateDir())
	}
	j, err := Open(ctx, t, opts)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	e := j.state.Get(name)
	if e == nil {
		return nil, fmt.Errorf("%s: no entry %s in the journal", j.statePath(), name)
	}
	return e, j.forget(name)
}

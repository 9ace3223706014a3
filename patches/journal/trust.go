package journal

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/smpatch/smpatch/internal/termsafe"
	"github.com/smpatch/smpatch/internal/words"
	"github.com/smpatch/smpatch/source"
)

// Adopting a journal written elsewhere. What a journal may write is what
// its entries record: the next command that writes finishes an entry in
// flight without being asked (a pending entry's "originals" are written
// back), and a revert writes an applied entry's. Trust therefore says, for
// every file, what would be written there and when, and the caller decides
// which files an entry may name at all (package patches: those its patch
// in the catalog writes).

// TrustOptions steer Trust.
type TrustOptions struct {
	Options
	// Refuse says why the file f of entry e must not be adopted ("" when
	// it may): orig is the original bytes the entry would write back there
	// (nil: the patch created the file), proved by their recorded hash.
	// Nil adopts every file the reader's checks pass.
	Refuse func(e *Entry, f *FileRecord, orig []byte) string
}

// TrustResult is what Trust adopted.
type TrustResult struct {
	Tree    string   `json:"tree"`
	Path    string   `json:"path"`
	Entries []*Entry `json:"entries"`
	// Writes are the files the adopted journal writes, entry by entry:
	// every file each entry records and the bytecode it puts back.
	Writes []*TrustWrite `json:"writes"`
	// Already is set when the journal was this user's already.
	Already bool `json:"already"`
	// BytecodeDropped is how many records of cached bytecode (.pyc files
	// an entry would put back beside its originals) adoption dropped.
	BytecodeDropped int `json:"bytecode_dropped"`
}

// TrustWrite is one file an adopted entry writes.
type TrustWrite struct {
	Entry string `json:"entry"`
	Path  string `json:"path"`
	// When: "next command" (an entry in flight: the next command that
	// writes finishes it, unasked) or "revert".
	When string `json:"when"`
	// What is written, for people: "its recorded original (1234 bytes)",
	// "removed (the patch created it)", "bytecode put back".
	What string `json:"what"`
	// Bytecode is set for a .pyc file put back beside an original.
	Bytecode bool `json:"bytecode"`
}

// TrustRefusedError is a journal Trust would not adopt: entries naming
// files the caller's rule refuses. Nothing was signed or written.
type TrustRefusedError struct {
	Path  string
	Files []string // "ENTRY names PATH, why"
}

func (e *TrustRefusedError) Error() string {
	more := ""
	if len(e.Files) > 1 {
		more = fmt.Sprintf(" (and %d more %s)", len(e.Files)-1, words.Plural(len(e.Files)-1, "file", "files"))
	}
	return fmt.Sprintf("%s: not adopted: entry %s%s; nothing signed or written", e.Path, termsafe.Line(e.Files[0]), more)
}

// Trust adopts the journal of t as this user's: after the checks every
// read makes (paths inside the tree and outside .git and the journal,
// hashes well formed, sizes bounded), after checking every path against
// the tree's symlinks and opts.Refuse, and every copy it would ever write
// back against its recorded hash, it signs state.json. Nothing in the tree
// is written and no entry in flight is finished: the next command does
// that, with its own checks. The result lists every file the journal
// writes, and when.
func Trust(ctx context.Context, t source.WritableTree, opts TrustOptions) (*TrustResult, error) {
	res := &TrustResult{Tree: t.Root(), Path: filepath.Join(t.StateDir(), stateName), Entries: []*Entry{}, Writes: []*TrustWrite{}}
	ok, err := Exists(t)
	if err != nil {
		return res, err
	}
	if !ok {
		return res, fmt.Errorf("%s: no journal to trust", res.Path)
	}
	j, err := open(ctx, t, opts.Options, true)
	if err != nil {
		return res, err
	}
	defer j.Close()
	res.Entries = append(res.Entries, j.state.Patches...)
	already := j.load(false) == nil
	var refused []string
	for _, e := range j.state.Patches {
		for _, f := range e.Files {
			if err := t.CheckPath(f.Path); err != nil {
				return res, fmt.Errorf("%s: entry %s: %w", res.Path, e.Name, err)
			}
			orig, w, err := j.trustWrites(e, f)
			if err != nil {
				return res, err
			}
			res.Writes = append(res.Writes, w...)
			if opts.Refuse != nil && !already {
				if why := opts.Refuse(e, f, orig); why != "" {
					refused = append(refused, e.Name+" names "+f.Path+", "+why)
				}
			}
		}
	}
	if already {
		res.Already = true
		j.cleanStale()
		return res, nil
	}
	if len(refused) > 0 {
		return res, &TrustRefusedError{Path: res.Path, Files: refused}
	}
	// Bytecode is code Python runs without reading its source (an
	// unchecked-hash .pyc always), and nothing but the writer vouches for
	// it: an adopted entry puts none back; the modules compile again.
	var kept []*TrustWrite
	for _, w := range res.Writes {
		if w.Bytecode {
			res.BytecodeDropped++
		} else {
			kept = append(kept, w)
		}
	}
	res.Writes = kept
	for _, e := range j.state.Patches {
		for _, f := range e.Files {
			f.Bytecode = nil
		}
	}
	if err := j.save(); err != nil {
		return res, err
	}
	j.cleanStale()
	return res, nil
}

// trustWrites checks the copies the file f of e would write back against
// their recorded hashes and says what each writes, and when; orig is the
// original bytes.
func (j *Journal) trustWrites(e *Entry, f *FileRecord) (orig []byte, _ []*TrustWrite, err error) {
	when := "revert"
	if e.State != Applied {
		when = "next command"
	}
	orig, err = j.Original(e, f)
	if err != nil {
		return nil, nil, err
	}
	what := fmt.Sprintf("its recorded original (%d bytes)", len(orig))
	if f.Original == "" {
		what = "removed (the patch created it)"
	}
	if e.State == Reverting && (f.Target != "" || f.TargetDelete) {
		b, err := j.target(e, f)
		if err != nil {
			return nil, nil, err
		}
		what = fmt.Sprintf("the bytes of a forced revert (%d bytes)", len(b))
		if f.TargetDelete {
			what = "removed (a forced revert)"
		}
	}
	out := []*TrustWrite{{Entry: e.Name, Path: f.Path, When: when, What: what}}
	for _, b := range f.Bytecode {
		out = append(out, &TrustWrite{Entry: e.Name, Path: b.Path, When: when, What: "bytecode put back beside " + f.Path, Bytecode: true})
	}
	return orig, out, nil
}

// String is the write for people, one line.
func (w *TrustWrite) String() string {
	when := "a revert writes"
	if w.When == "next command" {
		when = "the next command writes"
	}
	return termsafe.Line(fmt.Sprintf("%s: %s %s", w.Path, when, strings.TrimSpace(w.What)))
}

package patches

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// What Apply reads of the tree and reports: the files a set writes, an
// applied entry's drift, what a plan did per file, the read-back and the
// verify rules.

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

// entryDrift lists the files of an applied entry that no longer have the
// bytes the patch wrote, each with what it has now ("original", "changed",
// "missing").
func entryDrift(t source.Tree, e *journal.Entry) ([]string, error) {
	var out []string
	for _, f := range e.Files {
		h, err := journal.HashCurrent(t, f.Path)
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

// keptRecords reads the records (and copies) of the stale entry e that
// the plan p does not write: the entry replacing e keeps them.
func keptRecords(j *journal.Journal, e *journal.Entry, p *Plan) ([]journal.Kept, error) {
	writes := map[string]bool{}
	for _, c := range planChanges(p) {
		writes[c.fp.Path] = true
	}
	var out []journal.Kept
	for _, f := range e.Files {
		if writes[f.Path] {
			continue
		}
		k := journal.Kept{Record: f}
		var err error
		if k.Orig, err = j.Original(e, f); err != nil {
			return nil, err
		}
		if f.Patched != "" {
			k.Patched, _ = j.Patched(e, f) // only ever shown: a lost copy is not an error
		}
		out = append(out, k)
	}
	return out, nil
}

func errorsIsCrash(err error) bool { return errors.Is(err, journal.ErrCrash) }

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

// readBack re-reads every written file: it must have the bytes written.
func readBack(t source.Tree, changes []changedFile) error {
	for _, c := range changes {
		same, err := sameBytes(t, c.fp.Path, c.new)
		if err != nil {
			return fmt.Errorf("reading back %s: %w", c.fp.Path, err)
		}
		if !same {
			cur, err := journal.ReadCurrent(t, c.fp.Path)
			if err != nil {
				return fmt.Errorf("reading back %s: %w", c.fp.Path, err)
			}
			return fmt.Errorf("reading back %s: sha256 %s, expected %s", c.fp.Path, shortHash(journal.Hash(cur)), shortHash(journal.Hash(c.new)))
		}
	}
	return nil
}

// ruleError is a verify rule that does not hold.
type ruleError struct{ msg string }

func (e *ruleError) Error() string { return e.msg }

// checkRules checks the patch's verify rules on the files as read (read
// first, then the files an earlier patch of the set writes, then the
// tree), with the words that say when ("after writing", "on the result");
// a rule that fails is a *ruleError.
func checkRules(t source.Tree, p *Plan, read map[string][]byte, when string) error {
	touched := map[string]bool{}
	for _, fp := range p.Files {
		touched[fp.Path] = true
	}
	ov, _ := t.(*overlay)
	for i := range p.Patch.Verify {
		r := &p.Patch.Verify[i]
		b, ok := read[r.File]
		if !ok && ov != nil {
			// A file an earlier patch of the set writes: its bytes as
			// they are, not a copy.
			b, ok = ov.files[r.File]
		}
		if !ok {
			var err error
			if b, err = journal.ReadCurrent(t, r.File); err != nil {
				return fmt.Errorf("verify %s: %w", source.ShownPath(t, r.File), err)
			}
		}
		if b == nil {
			if touched[r.File] {
				return &ruleError{fmt.Sprintf("verify %s: file is missing %s", source.ShownPath(t, r.File), when)}
			}
			continue
		}
		if why := r.Fails(b); why != "" {
			return &ruleError{ruleMessage(t, r, why, when)}
		}
	}
	return nil
}

// ruleMessage says in one line that rule r fails, how, and when.
func ruleMessage(t source.Tree, r *VerifyRule, why, when string) string {
	if r.What == "" {
		return fmt.Sprintf("verify %s: %s %s", source.ShownPath(t, r.File), why, when)
	}
	if strings.Contains(why, "regex") {
		return fmt.Sprintf("verify %s: %s is not in place %s", source.ShownPath(t, r.File), r.What, when)
	}
	return fmt.Sprintf("verify %s: %s is not in place %s (%s)", source.ShownPath(t, r.File), r.What, when, why)
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

// sameBytes reports whether the tree file rel has exactly want (absent
// when want is nil).
func sameBytes(t source.Tree, rel string, want []byte) (bool, error) {
	cur, err := journal.ReadCurrent(t, rel)
	if err != nil {
		return false, err
	}
	return bytes.Equal(cur, want) && (cur == nil) == (want == nil), nil
}

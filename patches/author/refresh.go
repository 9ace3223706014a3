package author

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// RefreshOptions steer Refresh.
type RefreshOptions struct {
	ToolVersion string
	Waiting     func(line string)
	// Versions is the new variant's range (default: from the tree's
	// version on, the older variant cut there).
	Versions string
	// Replace replaces the diffs of the variant whose range admits the
	// tree's version, keeping its name and range, instead of adding one.
	Replace bool
}

// Refresh writes the shape user patch p has on tree t as a new variant of
// p, for t's version, beside the old variants (the one whose range held
// t's version is cut there). Two cases:
//
//   - p applies to t with an offset, fuzz or a file found by anchor: the
//     new variant is that result, as a diff with minimal context against
//     t's files; t is not changed.
//   - p does not apply because t already has its change, made by hand (a
//     conflict resolved after apply --merge or --reject): the new variant
//     is t's change, against t's pristine source, in the files p changes;
//     t is then recorded as having p applied with it.
//
// A patch that applies exactly has nothing to refresh (Result.Note).
func Refresh(ctx context.Context, t source.WritableTree, p *catalog.Patch, opts RefreshOptions) (*Result, error) {
	start := time.Now()
	if p.Origin == catalog.BuiltinOrigin {
		return nil, inputf("%s is a built-in patch: refresh writes only entries of a catalog directory of yours", p.Name)
	}
	if p.Project != t.Project() {
		return nil, inputf("%s is a %s patch; %s is a %s tree", p.Name, p.Project, t.Root(), t.Project())
	}
	ver, from := versionOf(ctx, t)
	if ver == "" && (opts.Replace || opts.Versions == "") {
		return nil, inputf("%s: the tree's version is unknown (%s): give --versions RANGE for the new variant", t.Root(), orElse(from, "not read"))
	}
	if opts.Replace && opts.Versions != "" {
		return nil, inputf("--replace keeps the variant's range: --versions is for a new variant")
	}
	if e, err := journalEntry(ctx, t, p.Name); err != nil {
		return nil, err
	} else if e != nil && !IsFinishEntry(e) {
		return nil, inputf("%s: the journal has %s applied (variant %s): `smpatch revert %s` first, then refresh it on the tree as released", t.Root(), p.Name, e.Variant, p.Name)
	}
	pl, err := patches.NewPlan(ctx, p, t, patches.PlanOptions{})
	if err != nil {
		return nil, err
	}
	res := &Result{Name: p.Name, Version: ver}
	var d *Diffed
	byHand := false
	switch {
	case pl.OK(false) && pl.Outcome() != patches.OutcomeAlreadyApplied:
		if exactly(pl) {
			res.Note = fmt.Sprintf("applies exactly here (variant %s): nothing to refresh", patches.VariantLabel(pl.Variant))
			res.Elapsed = time.Since(start)
			return res, nil
		}
		d = &Diffed{}
		for _, fp := range pl.Files {
			c := Change{Path: fp.Path, Old: fp.Old, New: fp.New}
			if fp.Create {
				c.Old = nil
			}
			if fp.Delete {
				c.New = nil
			}
			d.Changes = append(d.Changes, c)
		}
		res.Pristine = fmt.Sprintf("the tree's files, where variant %s lands with %s", patches.VariantLabel(pl.Variant), pl.Outcome())
	default:
		pr, err := PristineOf(t, "", "")
		if err != nil {
			return nil, inputf("%s does not apply to %s (%s), and the tree's own change cannot be read: %v", p.Name, t.Root(), pl.Reason, err)
		}
		only := map[string]bool{}
		for _, v := range p.Variants {
			for _, fd := range v.Files {
				only[fd.Path()] = true
			}
		}
		for _, fp := range pl.Files {
			only[fp.Path] = true
		}
		if d, err = compare(ctx, t, pr, only, p.Name); err != nil {
			return nil, err
		}
		if len(d.Changes) == 0 {
			return nil, &patches.AdoptError{Msg: fmt.Sprintf("%s does not apply to %s (%s) and the tree has no change of its own in its files: `smpatch apply %s --merge` (conflict markers) or `--reject` (.rej files), finish the edit, then refresh again", p.Name, t.Root(), pl.Reason, p.Name)}
		}
		res.Pristine = pr.Desc
		byHand = true
	}
	base := ""
	if byHand {
		if pr, _ := PristineOf(t, "", ""); pr != nil {
			base = pr.Base
		}
	}
	dir := p.Origin
	old, err := readEntry(dir, p.Name)
	if err != nil {
		return nil, err
	}
	diff := MakeDiff(d.Changes)
	var (
		v        entryVariant
		data     []byte
		narrow   = -1
		narrowTo string
		undoDiff = map[string][]byte{} // diffs overwritten: their bytes before
	)
	if opts.Replace {
		if v, data, undoDiff, err = replaceVariant(p, old, ver, base); err != nil {
			return nil, err
		}
		res.Replaced = true
	} else {
		if v, data, narrow, narrowTo, err = newVariant(p, old, ver, opts.Versions, base); err != nil {
			return nil, err
		}
	}
	if err := checkDiff(filepath.Join(dir, v.Diffs[0]), diff, d.Changes); err != nil {
		return nil, err
	}
	e := &Entry{Dir: dir, Name: p.Name, TOML: data, Diffs: map[string][]byte{v.Diffs[0]: diff}}
	np, err := e.Load()
	if err != nil {
		return nil, err
	}
	wrote, err := e.Write(false)
	if err != nil {
		return nil, err
	}
	if byHand {
		if err := dropFinishEntry(ctx, t, p.Name); err == nil {
			_, err = patches.Adopt(ctx, t, np, v.Name, d.Originals(), patches.ApplyOptions{ToolVersion: opts.ToolVersion, Waiting: opts.Waiting})
		}
		if err != nil {
			undo := &Entry{Dir: dir, Name: p.Name, TOML: old, Diffs: undoDiff}
			_, _ = undo.Write(false)
			for _, w := range wrote {
				if _, kept := undoDiff[w]; w != p.Name+".toml" && !kept {
					_ = os.Remove(filepath.Join(dir, w))
				}
			}
			return nil, err
		}
		res.Recorded = true
	}
	res.TOML = filepath.Join(dir, p.Name+".toml")
	res.Variant, res.Versions = v.Name, v.Versions
	res.Diffs = []string{filepath.Join(dir, v.Diffs[0])}
	for _, c := range d.Changes {
		res.Files = append(res.Files, source.ShownPath(t, c.Path))
	}
	res.Skipped = d.Skipped
	if narrow >= 0 {
		res.Narrowed = fmt.Sprintf("variant %s now covers %s", p.Variants[narrow].Name, narrowTo)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// exactly reports whether every hunk of pl landed exactly, at its path.
func exactly(pl *patches.Plan) bool {
	for _, fp := range pl.Files {
		if fp.Note != "" {
			return false
		}
		for _, h := range fp.Hunks {
			if h.Status != patches.Exact {
				return false
			}
		}
	}
	return true
}

var (
	rangeFrom   = regexp.MustCompile(`^>=\s*([^\s,<>=!~]+)$`)
	rangeWindow = regexp.MustCompile(`^>=\s*([^\s,<>=!~]+)\s*,\s*<\s*([^\s,<>=!~]+)$`)
)

// splitRange is the range of a new variant for version ver and the
// variant it cuts: the variant whose range admits ver (-1: none), with
// its new range. Ranges smpatch writes (">= A", ">= A, < B", or none)
// are cut at ver; another shape that admits ver is refused with a line.
func splitRange(p *catalog.Patch, ver string) (int, string, string, error) {
	v, err := source.ParseVersion(ver)
	if err != nil {
		return -1, "", "", err
	}
	for i, o := range p.Variants {
		if !o.Admits(v) {
			continue
		}
		r := strings.TrimSpace(o.Versions)
		switch {
		case r == "":
			return i, "< " + ver, ">= " + ver, nil
		case rangeFrom.MatchString(r):
			a := rangeFrom.FindStringSubmatch(r)[1]
			if a == ver {
				return -1, "", "", sameVersion(p, o.Name, ver)
			}
			return i, ">= " + a + ", < " + ver, ">= " + ver, nil
		case rangeWindow.MatchString(r):
			m := rangeWindow.FindStringSubmatch(r)
			if m[1] == ver {
				return -1, "", "", sameVersion(p, o.Name, ver)
			}
			return i, ">= " + m[1] + ", < " + ver, ">= " + ver + ", < " + m[2], nil
		default:
			return -1, "", "", inputf("%s: variant %s (%s) admits %s and its range is not one refresh can cut (>= A, or >= A, < B): narrow it by hand first", p.File, o.Name, r, ver)
		}
	}
	return -1, "", "== " + ver, nil
}

func orAny(s string) string {
	if s == "" {
		return "any version"
	}
	return s
}

// journalEntry is t's journal entry of name, or nil.
func journalEntry(ctx context.Context, t source.WritableTree, name string) (*journal.Entry, error) {
	ok, err := journal.Exists(t)
	if err != nil || !ok {
		return nil, err
	}
	j, err := journal.Read(ctx, t, journal.Options{})
	if err != nil {
		return nil, err
	}
	defer j.Close()
	return j.State().Get(name), nil
}

// sameVersion refuses a second variant for the release a variant starts
// at.
func sameVersion(p *catalog.Patch, variant, ver string) error {
	return inputf("%s: variant %s starts at %s, this tree's version: a second variant for one release cannot be told apart; `smpatch refresh %s --replace` replaces its diffs (its range kept)", p.File, variant, ver, p.Name)
}

// newVariant is the variant refresh adds for version ver (or the range
// given), and the entry old with it, first; narrow is the older variant
// cut at ver (-1: none) and narrowTo its new range.
func newVariant(p *catalog.Patch, old []byte, ver, given, base string) (entryVariant, []byte, int, string, error) {
	vr, err := rangeOf(ver, "", given, "the tree")
	if err != nil {
		return entryVariant{}, nil, -1, "", err
	}
	v := entryVariant{Name: vr.Name, Base: base}
	narrow, narrowTo := -1, ""
	if ver != "" {
		n, to, newRange, err := splitRange(p, ver)
		if err != nil {
			return v, nil, -1, "", err
		}
		narrow, narrowTo, v.Versions = n, to, newRange
	}
	for _, o := range p.Variants {
		if o.Name == v.Name {
			return v, nil, -1, "", inputf("%s: a variant %s exists already (%s): `smpatch refresh %s --replace` replaces the diffs of the variant that holds this version", p.File, v.Name, orAny(o.Versions), p.Name)
		}
	}
	if given != "" {
		v.Versions = vr.Range
	}
	v.Diffs = []string{diffName(p.Name, v.Name)}
	data, err := addVariant(old, v, narrow, narrowTo)
	if err != nil {
		return v, nil, -1, "", fmt.Errorf("%s: %v", p.File, err)
	}
	return v, data, narrow, narrowTo, nil
}

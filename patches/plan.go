package patches

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/patches/udiff"
	"github.com/smpatch/smpatch/source"
)

// FilePlan is what a Plan does to one file: how its diff landed on the
// file's bytes, at the path it was found.
type FilePlan struct {
	Path string // repository-relative target path (after anchor resolution)
	// Note says how the target was found when it is not the diff's path
	// (found by anchor in a search directory).
	Note string
	udiff.Result
}

// Outcome classifies a whole Plan.
type Outcome string

const (
	OutcomeApplies        Outcome = "applies"         // every hunk exact or offset
	OutcomeFuzzy          Outcome = "fuzzy"           // resolves, some hunk fuzzy
	OutcomeAlreadyApplied Outcome = "already-applied" // every hunk already present
	OutcomeConflict       Outcome = "conflict"        // some hunk conflicts
	OutcomeNoVariant      Outcome = "no-variant"      // no variant fits the tree
	// OutcomeRefused: the hunks resolve, but the patch may not go on this
	// tree: a patch it needs is not in place, or a verify rule fails on
	// the result.
	OutcomeRefused Outcome = "refused"
)

// PlanOptions tune NewPlan.
type PlanOptions struct {
	// Strict counts fuzzy hunks as failures (a fuzzy variant does not
	// resolve when variants are tried).
	Strict bool
	// Variant forces a variant by name (or by its range as written).
	Variant string
	// Memo, when set, remembers anchor-search matches per blob across plans
	// of revisions of one repository (trees that are FileHashers).
	Memo *Memo
	// Brief plans for the outcome only: a hunk that conflicts is not
	// explained (its reason may be shorter and no nearest region is
	// sought when nothing similar is found). Every status, variant and
	// outcome is the same as without it. A range walk plans most
	// revisions so, and again in full those it reports.
	Brief bool
}

// Attempt records one variant NewPlan planned.
type Attempt struct {
	Variant string  `json:"variant"`
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason"`
}

// Plan is one patch resolved against one tree: the variant chosen and, per
// file, the old and new bytes and every hunk's status. It is all or nothing:
// Changes is only meaningful when OK.
type Plan struct {
	Patch         *Patch
	Variant       *Variant // nil when no variant fits
	VariantReason string   // why this variant
	Version       string   // the tree's version (PEP 440), "" when unknown
	VersionFrom   string   // where the version was read, or why it is unknown
	Files         []*FilePlan
	Attempts      []Attempt // variants planned, in order
	Reason        string    // why the plan does not resolve (no variant, conflicts)
	// Refused says why a plan whose hunks resolve may not be applied: a
	// needed patch missing, or a verify rule that fails on the result.
	Refused string
	// Shape is the uncovered shape whose marker the tree has, when no
	// variant resolves.
	Shape *Uncovered
	// Retired says why the patch has nothing to do on this tree although
	// no variant resolves: the tree's version is at or past the release
	// upstream merged the change in ([upstream] merged_in). Such a plan is
	// already applied, with no files.
	Retired string

	attemptFiles     [][]*FilePlan // per attempt
	attemptConflicts []int         // per attempt
	// shown maps a repository path to the tree's (source.ShownPath).
	shown func(string) string
}

// Shown is the repository path rel as the tree the plan was made on shows
// it: sglang/x.py in a site-packages tree for python/sglang/x.py.
func (pl *Plan) Shown(rel string) string {
	if pl.shown == nil {
		return rel
	}
	return pl.shown(rel)
}

// VariantLabel is a variant's name, else its range.
func VariantLabel(v *Variant) string {
	if v == nil {
		return ""
	}
	if v.Name != "" {
		return v.Name
	}
	return v.Versions
}

// NewPlan resolves patch p against tree t. The variant is chosen by the
// tree's version; when the version is unknown, matches several variants or
// none, or the matching variant does not resolve, every variant is tried
// (those matching the version first) and the first that resolves is taken.
// opts.Variant forces one. The error is only for I/O: a conflict or a
// missing variant is a Plan whose Outcome says so.
func NewPlan(ctx context.Context, p *Patch, t source.Tree, opts PlanOptions) (*Plan, error) {
	pl, err := newPlan(ctx, p, t, opts)
	if err != nil {
		return nil, err
	}
	if err := pl.finish(t, opts.Strict); err != nil {
		return nil, err
	}
	return pl, nil
}

// finish judges a plan beyond its hunks: a plan that does not resolve on
// a tree with the marker of an uncovered shape says so. (The verify rules
// were checked on the result of every variant that resolved: a variant
// whose result breaks one is not chosen, or is refused.)
func (pl *Plan) finish(t source.Tree, strict bool) error {
	if pl.Refused != "" || pl.OK(strict) {
		return nil
	}
	u, err := uncoveredShape(pl.Patch, t)
	if err != nil {
		return err
	}
	if u != nil {
		pl.Shape = u
		pl.Reason = fmt.Sprintf("this tree is shape %s, which the catalog does not cover: %s (marker in %s)", shapeTitle(u), u.Why, source.ShownPath(t, u.File))
	}
	return nil
}

// refuse marks a plan whose hunks resolve as not to be applied, why in one
// line (also its Reason); "" leaves it as it is.
func (pl *Plan) refuse(why string) {
	if why == "" {
		return
	}
	pl.Refused, pl.Reason = why, why
}

// uncoveredShape is the first detectable uncovered shape whose marker t
// has, or nil.
func uncoveredShape(p *Patch, t source.Tree) (*Uncovered, error) {
	for i := range p.Uncovered {
		u := &p.Uncovered[i]
		if !u.Detectable() {
			continue
		}
		b, err := t.ReadFile(u.File)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		switch {
		case u.Contains != "" && bytes.Contains(b, []byte(u.Contains)):
			return u, nil
		case u.Regex != "":
			re, err := lazyre.Compile(u.Regex)
			if err != nil {
				return nil, fmt.Errorf("%s: uncovered %s: %w", p.File, u.Name, err)
			}
			if re.Match(b) {
				return u, nil
			}
		}
	}
	return nil, nil
}

func shapeTitle(u *Uncovered) string {
	if u.Window == "" {
		return u.Name
	}
	return fmt.Sprintf("%s (%s)", u.Name, u.Window)
}

// verifyResult checks the patch's verify rules on the bytes the tree would
// have after the plan, and says in one line which rule fails ("" when all
// hold). A rule on a file that neither exists nor is written is skipped.
func (pl *Plan) verifyResult(t source.Tree) (string, error) {
	if len(pl.Patch.Verify) == 0 {
		return "", nil
	}
	read := map[string][]byte{}
	for rel, b := range pl.Changes() {
		read[rel] = b
	}
	for _, fp := range pl.Files {
		if _, ok := read[fp.Path]; !ok && !fp.Create {
			if fp.Old != nil {
				read[fp.Path] = fp.Old
			}
		}
	}
	err := checkRules(t, pl, read, "on the result")
	if err == nil {
		return "", nil
	}
	var re *ruleError
	if errors.As(err, &re) {
		return re.Error(), nil
	}
	return "", err
}

func newPlan(ctx context.Context, p *Patch, t source.Tree, opts PlanOptions) (*Plan, error) {
	pl := &Plan{Patch: p, shown: func(rel string) string { return source.ShownPath(t, rel) }}
	defer pl.noteMoved()
	v, from, err := t.Version(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: reading version: %w", t.Root(), err)
	}
	pl.VersionFrom = from
	if v != nil {
		pl.Version = source.VersionString(v)
	}
	if len(p.Variants) == 0 {
		pl.Reason = fmt.Sprintf("patch %s has no variants", p.Name)
		return pl, nil
	}
	if opts.Variant != "" {
		return pl, pl.forced(ctx, t, opts)
	}
	var cands, rest []*Variant
	for _, c := range p.Variants {
		if v != nil && c.Admits(v) {
			cands = append(cands, c)
		} else {
			rest = append(rest, c)
		}
	}
	verText := "unknown version"
	if v != nil {
		verText = fmt.Sprintf("version %s from %s", pl.Version, from)
	} else if from != "" {
		// Trees say "unknown: why"; say "unknown" once.
		verText = fmt.Sprintf("unknown version (%s)", strings.TrimPrefix(from, "unknown: "))
	}
	order := append(append([]*Variant{}, cands...), rest...)
	for i, c := range order {
		if err := pl.try(ctx, t, c, opts); err != nil {
			return nil, err
		}
		if !resolves(pl.Attempts[i].Outcome, opts.Strict) {
			continue
		}
		pl.choose(c, i)
		switch {
		case len(cands) == 1 && i == 0:
			pl.VariantReason = fmt.Sprintf("%s matches %s", verText, rangeText(c))
		case i < len(cands):
			pl.VariantReason = fmt.Sprintf("%s matches %d variants; %s is the first that resolves", verText, len(cands), VariantLabel(c))
		case len(cands) > 0:
			pl.VariantReason = fmt.Sprintf("%s matches %s, %s", verText, labels(cands), pl.failedWords(len(cands), fmt.Sprintf("%s (%s)", VariantLabel(c), rangeText(c))))
		case v != nil:
			pl.VariantReason = fmt.Sprintf("%s matches no variant's range; %s (%s) resolves", verText, VariantLabel(c), rangeText(c))
		default:
			pl.VariantReason = fmt.Sprintf("%s; %s (%s) is the first variant that resolves", verText, VariantLabel(c), rangeText(c))
		}
		if i > 0 {
			pl.VariantReason += fmt.Sprintf(" (tried %s)", labels(order[:i]))
		}
		return pl, nil
	}
	// No variant applies. One whose hunks resolve but whose result breaks
	// a verify rule is refused, the version's first: it says what would be
	// left undone.
	if i := pl.firstRefused(len(cands)); i >= 0 {
		pl.choose(order[i], i)
		if i < len(cands) {
			pl.VariantReason = fmt.Sprintf("%s matches %s", verText, rangeText(order[i]))
		} else {
			pl.VariantReason = fmt.Sprintf("%s; %s (%s) resolves but leaves a verify rule unmet", verText, VariantLabel(order[i]), rangeText(order[i]))
		}
		why := pl.Attempts[i].Reason
		if len(order) > 1 {
			why += fmt.Sprintf("; no variant applies without leaving a rule unmet (tried %s)", labels(order))
		}
		pl.refuse(why)
		return pl, nil
	}
	// Nothing resolves. On a tree whose version is at or past the release
	// upstream merged the change in, the patch is retired there.
	if why := retiredBy(p, v, t); why != "" {
		pl.Retired, pl.VariantReason = why, verText+"; "+why
		return pl, nil
	}
	// Else show the variant the version names, else the one with the
	// fewest conflicts.
	switch {
	case len(cands) > 0:
		pl.choose(cands[0], 0)
		pl.VariantReason = fmt.Sprintf("%s matches %s", verText, rangeText(cands[0]))
	case v != nil:
		pl.Reason = fmt.Sprintf("%s matches no variant's range (%s), and no variant resolves", verText, ranges(p.Variants))
		return pl, nil
	default:
		best := 0
		for i := range pl.Attempts {
			if pl.attemptConflicts[i] < pl.attemptConflicts[best] {
				best = i
			}
		}
		pl.choose(order[best], best)
		pl.VariantReason = fmt.Sprintf("%s; no variant resolves, %s has the fewest conflicts", verText, VariantLabel(order[best]))
	}
	pl.setReason()
	return pl, nil
}

// retiredBy says why a patch is upstream on the tree t of version v: the
// tree has the [upstream] marker and its version is at or past merged_in
// (or unknown: the marker is upstream's own line); without a marker, the
// version alone. "" when neither holds.
func retiredBy(p *Patch, v *version.Version, t source.Tree) string {
	u := p.Upstream
	if u.MergedIn == "" || u.MergedInCommit() {
		return "" // a commit says when, not which releases
	}
	m, err := source.ParseVersion(u.MergedIn)
	if err != nil || (v != nil && v.LessThan(m)) || (v == nil && u.Marker == "") {
		return ""
	}
	why := fmt.Sprintf("upstream has this change since %s ([upstream] merged_in)", u.MergedIn)
	if u.Marker != "" {
		ok, where := UpstreamMarker(t, p)
		if !ok {
			return ""
		}
		why += fmt.Sprintf(", and the tree has its marker at %s", where)
	}
	return why + "; no variant is for this tree: nothing to do"
}

// forced plans the variant opts.Variant names (by name, or by its range as
// written): it is the plan, whether it resolves or not, and a result that
// breaks a verify rule is refused.
func (pl *Plan) forced(ctx context.Context, t source.Tree, opts PlanOptions) error {
	p := pl.Patch
	var vr *Variant
	var names []string
	for _, c := range p.Variants {
		names = append(names, VariantLabel(c))
		if c.Name == opts.Variant || c.Versions == opts.Variant {
			vr = c
		}
	}
	if vr == nil {
		pl.Reason = fmt.Sprintf("patch %s has no variant %q (variants: %s)", p.Name, opts.Variant, strings.Join(names, ", "))
		return nil
	}
	if err := pl.try(ctx, t, vr, opts); err != nil {
		return err
	}
	pl.choose(vr, 0)
	pl.VariantReason = fmt.Sprintf("variant %s named explicitly", VariantLabel(vr))
	if a := pl.Attempts[0]; a.Outcome == OutcomeRefused {
		pl.refuse(a.Reason + fmt.Sprintf(" (variant %s named explicitly)", VariantLabel(vr)))
		return nil
	}
	pl.setReason()
	return nil
}

// failedWords says why the first n attempts (the variants the version
// names) were not taken, and that chosen was: they conflict, or their
// result leaves a verify rule unmet and the content chose another.
func (pl *Plan) failedWords(n int, chosen string) string {
	for _, a := range pl.Attempts[:n] {
		if a.Outcome == OutcomeRefused {
			return fmt.Sprintf("which leaves a verify rule unmet (%s); by content, %s applies", a.Reason, chosen)
		}
	}
	if n == 1 {
		return "which does not resolve; " + chosen + " resolves"
	}
	return "which do not resolve; " + chosen + " resolves"
}

// firstRefused is the first attempt whose hunks resolve but whose result
// breaks a verify rule, among the first n (the version's variants) if one
// of them is, else among all; -1 when there is none.
func (pl *Plan) firstRefused(n int) int {
	first := -1
	for i, a := range pl.Attempts {
		if a.Outcome != OutcomeRefused {
			continue
		}
		if i < n {
			return i
		}
		if first < 0 {
			first = i
		}
	}
	return first
}

func resolves(o Outcome, strict bool) bool {
	return o == OutcomeApplies || o == OutcomeAlreadyApplied || (o == OutcomeFuzzy && !strict)
}

func labels(vs []*Variant) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = VariantLabel(v)
	}
	return strings.Join(s, ", ")
}

func ranges(vs []*Variant) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = rangeText(v)
	}
	return strings.Join(s, "; ")
}

// rangeText is a variant's version range for people: an empty range
// admits every version.
func rangeText(v *Variant) string {
	if v.Versions == "" {
		return "any version"
	}
	return v.Versions
}

// try plans variant c and records the attempt. An attempt whose hunks
// resolve is judged on its result: one that breaks a verify rule is
// refused, the rule in its reason.
func (pl *Plan) try(ctx context.Context, t source.Tree, c *Variant, opts PlanOptions) error {
	files, err := planVariant(ctx, t, c, pl.Patch, opts.Memo, !opts.Brief)
	if err != nil {
		return err
	}
	probe := &Plan{Patch: pl.Patch, Variant: c, Files: files}
	o := probe.Outcome()
	a := Attempt{Variant: VariantLabel(c), Outcome: o}
	switch {
	case o == OutcomeConflict:
		a.Reason = firstConflict(pl.Shown, files)
	case o == OutcomeFuzzy && opts.Strict:
		a.Reason = "fuzzy hunks (strict)"
		if f := firstFuzzy(pl.Shown, files); f != "" {
			a.Reason += ": " + f
		}
	case resolves(o, false):
		why, err := probe.verifyResult(t)
		if err != nil {
			return err
		}
		if why != "" {
			a.Outcome, a.Reason = OutcomeRefused, why
		}
	}
	pl.Attempts = append(pl.Attempts, a)
	pl.attemptFiles = append(pl.attemptFiles, files)
	pl.attemptConflicts = append(pl.attemptConflicts, len(probe.Conflicts()))
	return nil
}

func (pl *Plan) choose(c *Variant, attempt int) {
	pl.Variant = c
	pl.Files = pl.attemptFiles[attempt]
}

func (pl *Plan) setReason() {
	if pl.Outcome() == OutcomeConflict {
		pl.Reason = firstConflict(pl.Shown, pl.Files)
		if n := len(pl.Conflicts()); n > 1 {
			pl.Reason += fmt.Sprintf(" (and %d more)", n-1)
		}
	}
}

// noteMoved adds to the variant's reason the files its diffs name that were
// found elsewhere by anchor search, so that the label shown beside the
// variant says where its hunks went.
func (pl *Plan) noteMoved() {
	if pl.Variant == nil {
		return
	}
	var moved []string
	for _, fp := range pl.Files {
		if fp.Diff != nil && fp.Path != fp.Diff.Path() {
			moved = append(moved, fmt.Sprintf("%s found by search as %s", pl.Shown(fp.Diff.Path()), pl.Shown(fp.Path)))
		}
	}
	if len(moved) > 0 {
		pl.VariantReason += "; " + strings.Join(moved, "; ")
	}
}

// Tried is every variant's attempt, each with its first failing hunk, when
// the plan does not resolve and more than one variant was planned (or none
// was chosen); nil otherwise. It is what a person needs to see why nothing
// resolves, beyond the one variant shown.
func (pl *Plan) Tried() []Attempt {
	if pl.Refused != "" {
		if len(pl.Attempts) > 1 && slices.ContainsFunc(pl.Attempts, func(a Attempt) bool { return a.Outcome == OutcomeRefused }) {
			return pl.Attempts // each variant left a rule unmet, or conflicts
		}
		return nil // the refusal is not about variants
	}
	if pl.Outcome() == OutcomeNoVariant || (len(pl.Attempts) > 1 && !resolves(pl.Outcome(), false)) {
		return pl.Attempts
	}
	return nil
}

// shownIn maps repository paths to those of the tree t.
func shownIn(t source.Tree) func(string) string {
	return func(rel string) string { return source.ShownPath(t, rel) }
}

// firstFuzzy names the first fuzzy hunk of files.
func firstFuzzy(shown func(string) string, files []*FilePlan) string {
	for _, f := range files {
		for _, h := range f.Hunks {
			if h.Status == Fuzzy {
				return fmt.Sprintf("%s: hunk %d: %s", shown(f.Path), h.Index+1, h.Reason)
			}
		}
	}
	return ""
}

func firstConflict(shown func(string) string, files []*FilePlan) string {
	for _, f := range files {
		for _, h := range f.Hunks {
			if h.Status == Conflict {
				return fmt.Sprintf("%s: hunk %d: %s", shown(f.Path), h.Index+1, h.Reason)
			}
		}
	}
	return ""
}

// planVariant matches every diff of a variant against t. Diffs of the same
// file apply in order, each to the previous one's result.
func planVariant(ctx context.Context, t source.Tree, c *Variant, p *Patch, memo *Memo, explain bool) ([]*FilePlan, error) {
	if len(c.Files) == 0 && len(c.Diffs) > 0 {
		return nil, fmt.Errorf("variant %s: diffs %s were not parsed", VariantLabel(c), strings.Join(c.Diffs, ", "))
	}
	type state struct {
		data   []byte
		exists bool
	}
	cur := map[string]state{}
	read := func(rel string) (state, error) {
		if s, ok := cur[rel]; ok {
			return s, nil
		}
		data, err := t.ReadFile(rel)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return state{}, nil
		case err != nil:
			return state{}, err
		}
		if data == nil {
			data = []byte{}
		}
		return state{data: data, exists: true}, nil
	}
	hasher, _ := t.(FileHasher)
	if memo == nil {
		hasher = nil
	}
	var out []*FilePlan
	for _, fd := range c.Files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		target := fd.Path()
		_, changed := cur[target]
		st, err := read(target)
		if err != nil {
			return nil, err
		}
		note := ""
		if !st.exists && !fd.IsCreate() && !fd.IsDelete() && len(c.Search) > 0 && len(fd.Hunks) > 0 {
			found, data, why, err := findByAnchor(ctx, t, fd, c.Search, "", memo)
			if err != nil {
				return nil, err
			}
			if found != "" {
				target, st, note = found, state{data: data, exists: true}, source.ShownPath(t, fd.Path())+" not found; "+why
				if s, ok := cur[found]; ok {
					st = s
				}
			} else {
				note = why
			}
		}
		var fp *FilePlan
		var key fileKey
		if hasher != nil && st.exists && note == "" && !changed {
			if h, ok := hasher.FileHash(target); ok {
				key = fileKey{fd, h, explain}
				fp, _ = memo.getFile(key, st.data)
			}
		}
		if fp == nil {
			fp = matchFile(st.data, st.exists, fd, explain)
			fp = settleEquivalent(fp, st.data, fd, p, target, explain)
			if key.fd != nil {
				memo.putFile(key, fp)
			}
		}
		fp.Path = target
		fp.Note = note
		if st.exists && note == "" && !fd.IsCreate() && !fd.IsDelete() && len(c.Search) > 0 && len(fd.Hunks) > 0 && hasConflict(fp) {
			// The file is there but the code moved on: look for it by anchor
			// and take the other file only when the whole diff resolves there.
			found, data, why, err := findByAnchor(ctx, t, fd, c.Search, target, memo)
			if err != nil {
				return nil, err
			}
			if found != "" {
				if s, ok := cur[found]; ok {
					data = s.data
				}
				alt := settleEquivalent(matchFile(data, true, fd, explain), data, fd, p, found, explain)
				if !hasConflict(alt) {
					alt.Path = found
					alt.Note = fmt.Sprintf("%s does not match (%s); %s", source.ShownPath(t, target), firstConflict(shownIn(t), []*FilePlan{fp}), why)
					fp, target = alt, found
				}
			}
		}
		if !st.exists && note != "" && !fd.IsCreate() && !fd.IsDelete() {
			for i := range fp.Hunks {
				fp.Hunks[i].Reason = "file not found; " + note
			}
		}
		for i := range fp.Hunks {
			fp.Hunks[i].Path = target
		}
		if fp.New != nil || fp.Delete {
			cur[target] = state{data: fp.New, exists: !fp.Delete}
		}
		if i := slices.IndexFunc(out, func(o *FilePlan) bool { return o.Path == target }); i >= 0 {
			out[i] = composeFile(out[i], fp)
			continue
		}
		out = append(out, fp)
	}
	return out, nil
}

// composeFile is one file plan for two diffs of one file, the second
// planned on the first's result: the old bytes of the first, the new bytes
// of the second, and the hunks of both, numbered on (hunk n of the second
// diff is hunk len(first's hunks)+n). Its Diff holds the hunks of both, in
// that order, so that a hunk's Index still finds its header.
func composeFile(a, b *FilePlan) *FilePlan {
	c := *a
	base := len(a.Hunks)
	if a.Diff != nil && len(a.Diff.Hunks) > base {
		base = len(a.Diff.Hunks)
	}
	if a.Diff != nil && b.Diff != nil {
		d := *a.Diff
		d.NewPath = b.Diff.NewPath
		d.NewMode = b.Diff.NewMode
		d.Hunks = append(append(make([]*Hunk, 0, base+len(b.Diff.Hunks)), a.Diff.Hunks...), make([]*Hunk, base-len(a.Diff.Hunks))...)
		d.Hunks = append(d.Hunks, b.Diff.Hunks...)
		c.Diff = &d
	}
	c.Hunks = append([]HunkResult(nil), a.Hunks...)
	for _, h := range b.Hunks {
		h.Index += base
		c.Hunks = append(c.Hunks, h)
	}
	c.New, c.Delete = b.New, b.Delete
	if hasConflict(a) || hasConflict(b) {
		c.New = nil
	}
	switch {
	case c.Note == "":
		c.Note = b.Note
	case b.Note != "" && b.Note != c.Note:
		c.Note += "; " + b.Note
	}
	return &c
}

func hasConflict(fp *FilePlan) bool { return fp.Conflicts() }

// matchFile is how fd lands on the bytes of its target (data; exists says
// whether the file is there), as a plan of one file at the diff's path;
// without explain, a hunk that conflicts is not explained further.
func matchFile(data []byte, exists bool, fd *FileDiff, explain bool) *FilePlan {
	old := data
	if !exists {
		old = nil
	} else if old == nil {
		old = []byte{}
	}
	r := udiff.MatchBrief
	if explain {
		r = udiff.Match
	}
	return &FilePlan{Path: fd.Path(), Result: *r(old, fd)}
}

// Outcome classifies the plan.
func (p *Plan) Outcome() Outcome {
	if p.Refused != "" {
		return OutcomeRefused
	}
	if p.Retired != "" {
		return OutcomeAlreadyApplied
	}
	if p.Variant == nil {
		return OutcomeNoVariant
	}
	total, already, fuzzy := 0, 0, 0
	for _, f := range p.Files {
		for _, h := range f.Hunks {
			total++
			switch h.Status {
			case Conflict:
				return OutcomeConflict
			case AlreadyApplied:
				already++
			case Fuzzy:
				fuzzy++
			}
		}
	}
	switch {
	case total > 0 && already == total:
		return OutcomeAlreadyApplied
	case fuzzy > 0:
		return OutcomeFuzzy
	}
	return OutcomeApplies
}

// OK reports whether every hunk resolved; with strict, fuzzy hunks fail.
func (p *Plan) OK(strict bool) bool { return resolves(p.Outcome(), strict) }

// Conflicts lists the conflicting hunks of every file.
func (p *Plan) Conflicts() []HunkResult {
	var out []HunkResult
	for _, f := range p.Files {
		for _, h := range f.Hunks {
			if h.Status == Conflict {
				out = append(out, h)
			}
		}
	}
	return out
}

// fileChange is one path's original and final bytes across the plan.
type fileChange struct {
	path           string
	old, new       []byte
	existed, keeps bool // keeps: exists after the plan
}

func (p *Plan) fileChanges() []fileChange {
	var order []string
	byPath := map[string]*fileChange{}
	for _, f := range p.Files {
		c, ok := byPath[f.Path]
		if !ok {
			c = &fileChange{path: f.Path, old: f.Old, existed: f.Old != nil && !f.Create}
			if f.Create && f.Old != nil { // already present
				c.existed = true
			}
			byPath[f.Path] = c
			order = append(order, f.Path)
		}
		c.new = f.New
		c.keeps = !f.Delete && (f.New != nil)
	}
	var out []fileChange
	for _, path := range order {
		c := byPath[path]
		if c.existed == c.keeps && bytes.Equal(c.old, c.new) {
			continue
		}
		out = append(out, *c)
	}
	return out
}

// Changes maps each path whose bytes change to its new bytes; a deleted
// file maps to nil. It is nil unless the plan resolves (OK(false)).
func (p *Plan) Changes() map[string][]byte {
	if !p.OK(false) {
		return nil
	}
	out := map[string][]byte{}
	for _, c := range p.fileChanges() {
		if c.keeps {
			out[c.path] = c.new
		} else {
			out[c.path] = nil
		}
	}
	return out
}

// UnifiedDiff is the git-style diff, with three lines of context, from the
// tree's bytes to the bytes the plan writes. Empty when nothing changes or
// the plan does not resolve.
func (p *Plan) UnifiedDiff() []byte {
	if !p.OK(false) {
		return nil
	}
	var b bytes.Buffer
	for _, c := range p.fileChanges() {
		var old, nw []byte
		if c.existed {
			old = c.old
		}
		if c.keeps {
			nw = c.new
		}
		b.Write(udiff.Unified(p.Shown(c.path), old, nw, c.existed, c.keeps))
	}
	return b.Bytes()
}

package patches

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
)

// Set is a list of patches planned on one tree, each on the result of
// those before it: the second patch sees the bytes the first would write.
// It is what apply writes, what a dry run shows, what the image builder
// puts in a layer and what the matrix runner applies per cell.
type Set struct {
	Tree   source.Tree
	Strict bool
	// Variants are the variants named for patches (patch name -> variant
	// name), kept so that a set planned again names them again.
	Variants map[string]string
	Plans    []*Plan // one per patch, in the order given (needed patches first)
}

// SetOptions tune PlanSet.
type SetOptions struct {
	Strict bool // fuzzy hunks make the set not apply
	// Variants names the variant of a patch (patch name -> variant name,
	// or its range as written) instead of choosing it: that variant is the
	// plan, refused when its result leaves a verify rule unmet.
	Variants map[string]string
}

// PlanSet plans ps on t in order, each patch on the result of those before
// it; a patch named before a patch of ps it needs is moved after it. It reads t and writes nothing. A patch that does not resolve adds
// nothing to what the patches after it see. The error is only for I/O:
// why the set does not apply is Set.Problem.
func PlanSet(ctx context.Context, t source.Tree, ps []*Patch, opts SetOptions) (*Set, error) {
	s := &Set{Tree: t, Strict: opts.Strict, Variants: opts.Variants}
	ov := &overlay{t: t, files: map[string][]byte{}}
	planned := map[string]bool{}
	for _, p := range catalog.NeedsFirst(ps) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pl, err := NewPlan(ctx, p, ov, PlanOptions{Strict: opts.Strict, Variant: opts.Variants[p.Name]})
		if err != nil {
			return nil, err
		}
		// A patch whose own hunks do not resolve says so; one that
		// resolves is refused when what it needs is not in place.
		if pl.OK(opts.Strict) || pl.Refused != "" {
			why, err := needsMissing(ctx, ov, p, planned, opts.Strict)
			if err != nil {
				return nil, err
			}
			pl.refuse(why)
		}
		planned[p.Name] = true
		// A plan on the overlay names the tree, not the overlay.
		s.Plans = append(s.Plans, pl)
		for rel, b := range pl.Changes() {
			ov.files[rel] = b
		}
	}
	return s, nil
}

// needsMissing says in one line which patch p needs is not in place on t
// ("" when all are): each must be earlier in the set (planned) or already
// applied on t, which planning it there shows (every hunk already
// present).
func needsMissing(ctx context.Context, t source.Tree, p *Patch, planned map[string]bool, strict bool) (string, error) {
	for i, n := range p.Needs {
		if planned[n] {
			continue
		}
		if needed := p.NeedsPatches(); i < len(needed) {
			q, err := NewPlan(ctx, needed[i], t, PlanOptions{Strict: strict})
			if err != nil {
				return "", err
			}
			if q.Outcome() == OutcomeAlreadyApplied {
				continue
			}
		}
		return fmt.Sprintf("needs %s, which the tree does not have: apply it first, or in the same command before %s (smpatch apply %s %s)", n, p.Name, n, p.Name), nil
	}
	return "", nil
}

// Problem explains why a set of patches does not apply: the first patch
// that does not resolve, on the tree, and why.
type Problem struct {
	Plan *Plan  // the plan that does not resolve
	Tree string // the tree, for people: root, kind, project and version
	Why  string // one line
}

func (p *Problem) Error() string {
	return fmt.Sprintf("%s does not apply to %s: %s", p.Plan.Patch.Name, p.Tree, p.Why)
}

// Problem is nil when every plan of the set resolves (fuzzy hunks count as
// conflicts when the set is strict); otherwise it says which patch does
// not apply, where and why.
func (s *Set) Problem() *Problem {
	for i, pl := range s.Plans {
		if pl.OK(s.Strict) {
			continue
		}
		why := planWhy(pl, s.Strict)
		if on := s.changedBefore(i, pl); len(on) > 0 {
			why += fmt.Sprintf(" (planned on top of %s)", strings.Join(on, ", "))
		}
		if ok, where := UpstreamMarker(s.Tree, pl.Patch); ok {
			why += fmt.Sprintf(" (the tree already has the upstream change: marker at %s)", where)
		}
		return &Problem{Plan: pl, Tree: TreeLine(context.Background(), s.Tree), Why: why}
	}
	return nil
}

// changedBefore names the patches before plan i that change a file plan pl
// reads.
func (s *Set) changedBefore(i int, pl *Plan) []string {
	reads := map[string]bool{}
	for _, fp := range pl.Files {
		reads[fp.Path] = true
	}
	var out []string
	for _, prev := range s.Plans[:i] {
		for rel := range prev.Changes() {
			if reads[rel] {
				out = append(out, prev.Patch.Name)
				break
			}
		}
	}
	return out
}

// planWhy says in one line why a plan does not resolve.
func planWhy(pl *Plan, strict bool) string {
	switch pl.Outcome() {
	case OutcomeRefused:
		return pl.Refused
	case OutcomeNoVariant:
		if pl.Reason != "" {
			return pl.Reason
		}
		return "no variant fits the tree"
	case OutcomeFuzzy:
		if strict {
			for _, fp := range pl.Files {
				for _, h := range fp.Hunks {
					if h.Status == Fuzzy {
						return fmt.Sprintf("%s: hunk %d only matches fuzzily (similarity %.2f at line %d) and --strict is set", pl.Shown(fp.Path), h.Index+1, h.Score, h.Line)
					}
				}
			}
		}
	}
	if pl.Reason != "" {
		return pl.Reason
	}
	if c := firstConflict(pl.Shown, pl.Files); c != "" {
		return c
	}
	return string(pl.Outcome())
}

// Changes maps each path the set changes to its final bytes (nil: deleted),
// relative to the tree as it is. It is nil unless the set applies.
func (s *Set) Changes() map[string][]byte {
	if s.Problem() != nil {
		return nil
	}
	out := map[string][]byte{}
	for _, pl := range s.Plans {
		for rel, b := range pl.Changes() {
			out[rel] = b
		}
	}
	for rel, b := range out {
		old, err := s.Tree.ReadFile(rel)
		switch {
		case err == nil && b != nil && string(old) == string(b):
			delete(out, rel) // a later patch restored it
		case err != nil && b == nil:
			delete(out, rel) // created, then deleted
		}
	}
	return out
}

// UnifiedDiff is every plan's diff in order, each from the bytes the
// patches before it leave. Empty when the set does not apply.
func (s *Set) UnifiedDiff() []byte {
	if s.Problem() != nil {
		return nil
	}
	var out []byte
	for _, pl := range s.Plans {
		out = append(out, pl.UnifiedDiff()...)
	}
	return out
}

// stale reports whether the set was not planned on the bytes t has now:
// each plan on the disk's bytes where no plan before it writes, on the
// bytes the plans before it write elsewhere. Each path is read once.
func (s *Set) stale(t source.WritableTree) (bool, error) {
	after := map[string][]byte{} // path -> bytes the plans so far leave (nil: absent)
	for _, pl := range s.Plans {
		for _, fp := range pl.Files {
			want := fp.Old
			if fp.Create {
				want = nil
			} else if want == nil {
				want = []byte{}
			}
			if have, ok := after[fp.Path]; ok {
				if (have == nil) != (want == nil) || !bytes.Equal(have, want) {
					return true, nil
				}
				continue
			}
			same, err := sameBytes(t, fp.Path, want)
			if err != nil {
				return false, err
			}
			if !same {
				return true, nil
			}
			after[fp.Path] = want
		}
		for rel, b := range pl.Changes() {
			after[rel] = b
		}
	}
	return false, nil
}

func (s *Set) patches() []*Patch {
	out := make([]*Patch, len(s.Plans))
	for i, pl := range s.Plans {
		out[i] = pl.Patch
	}
	return out
}

// TreeLine names a tree for people: its root, kind, project and version
// with where the version was read.
func TreeLine(ctx context.Context, t source.Tree) string {
	v, from, err := t.Version(ctx)
	ver := "version unknown"
	switch {
	case err != nil:
		ver = "version unknown: " + err.Error()
	case v != nil:
		ver = fmt.Sprintf("version %s from %s", source.VersionString(v), from)
	case from != "":
		ver = "version " + from
	}
	if via := source.ViaOf(t); via != "" {
		ver += "; " + via
	}
	return fmt.Sprintf("%s (%s of %s, %s)", t.Root(), t.Kind(), t.Project(), ver)
}

// overlay is a tree plus the changes of the patches planned so far.
type overlay struct {
	t     source.Tree
	files map[string][]byte // rel -> bytes (nil: deleted)
	// The version of t, read once for every plan of the set.
	ver     *version.Version
	verFrom string
	verErr  error
	verRead bool
}

func (o *overlay) Root() string            { return o.t.Root() }
func (o *overlay) Kind() source.Kind       { return o.t.Kind() }
func (o *overlay) Project() source.Project { return o.t.Project() }
func (o *overlay) Version(ctx context.Context) (*version.Version, string, error) {
	if !o.verRead {
		o.ver, o.verFrom, o.verErr = o.t.Version(ctx)
		o.verRead = o.verErr == nil
	}
	return o.ver, o.verFrom, o.verErr
}

func (o *overlay) ReadFile(rel string) ([]byte, error) {
	if b, ok := o.files[rel]; ok {
		if b == nil {
			return nil, &fs.PathError{Op: "read", Path: rel, Err: fs.ErrNotExist}
		}
		return append([]byte(nil), b...), nil
	}
	return o.t.ReadFile(rel)
}

func (o *overlay) ListFiles(dir string) ([]string, error) {
	base, err := o.t.ListFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(o.files) == 0 {
		return base, nil
	}
	set := map[string]bool{}
	for _, p := range base {
		set[p] = true
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for rel, b := range o.files {
		if dir != "" && !strings.HasPrefix(rel, prefix) {
			continue
		}
		set[rel] = b != nil
	}
	out := make([]string, 0, len(set))
	for p, ok := range set {
		if ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// PlanWithNeeds plans p on t after the patches it needs, each planned on
// the result of those before it, as `apply` plans them when named
// together: what an upstream check needs to say whether p would apply with
// its needs on that revision. When a needed patch does not resolve and
// p's own hunks do, p's plan is refused with why.
func PlanWithNeeds(ctx context.Context, p *Patch, t source.Tree, opts PlanOptions) (*Plan, error) {
	needed := p.Needed()
	if len(needed) == 0 {
		return NewPlan(ctx, p, t, opts)
	}
	ov := &overlay{t: t, files: map[string][]byte{}}
	var on source.Tree = ov
	if h, ok := t.(FileHasher); ok {
		on = &hashedOverlay{overlay: ov, h: h}
	}
	var missing string
	for _, q := range needed {
		qo := opts
		qo.Variant = ""
		ql, err := NewPlan(ctx, q, on, qo)
		if err != nil {
			return nil, err
		}
		if !ql.OK(opts.Strict) {
			if missing == "" {
				missing = fmt.Sprintf("needs %s, which does not apply here: %s", q.Name, planWhy(ql, opts.Strict))
			}
			continue
		}
		for rel, b := range ql.Changes() {
			ov.files[rel] = b
		}
	}
	pl, err := NewPlan(ctx, p, on, opts)
	if err != nil {
		return nil, err
	}
	if pl.OK(opts.Strict) || pl.Refused != "" {
		pl.refuse(missing)
	}
	return pl, nil
}

// hashedOverlay is an overlay on a tree that names files by blob hash:
// files the overlay does not change keep their hash (and so their memo).
type hashedOverlay struct {
	*overlay
	h FileHasher
}

func (o *hashedOverlay) FileHash(rel string) (BlobHash, bool) {
	if _, ok := o.files[rel]; ok {
		return BlobHash{}, false
	}
	return o.h.FileHash(rel)
}

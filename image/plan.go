package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
)

// Base is an opened base image, indexed once and shared by every cell
// built on it.
type Base struct {
	Ref    *Ref
	Image  v1.Image
	Digest v1.Hash
	FS     *FS

	mu    sync.Mutex
	trees map[source.Project]*Tree
	errs  map[source.Project]error
}

// OpenBase opens and indexes a base image (one streaming pass over its
// layers).
func OpenBase(ctx context.Context, ref string, rem Remote, opts FSOptions) (*Base, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	img, err := Open(ctx, r, rem)
	if err != nil {
		return nil, err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	opts.diffOnly = r.Kind == "tarball"
	f, err := NewFS(ctx, img, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return &Base{Ref: r, Image: img, Digest: d, FS: f, trees: map[source.Project]*Tree{}, errs: map[source.Project]error{}}, nil
}

// Tree returns project p as found in the base, or an error wrapping
// ErrNoProject.
func (b *Base) Tree(p source.Project) (*Tree, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t, ok := b.trees[p]; ok {
		return t, nil
	}
	if err, ok := b.errs[p]; ok {
		return nil, err
	}
	loc, err := Locate(b.FS, p)
	if err != nil {
		err = fmt.Errorf("base %s: %w", b.Ref.Raw, err)
		b.errs[p] = err
		return nil, err
	}
	t := NewTree(b.FS, loc, b.Ref.Raw+"@"+b.Digest.String())
	b.trees[p] = t
	return t, nil
}

// Projects lists the projects found in the base with their versions.
func (b *Base) Projects(ctx context.Context) []ManifestProject {
	var out []ManifestProject
	for _, p := range []source.Project{source.FlashInfer, source.SGLang} {
		t, err := b.Tree(p)
		if err != nil {
			continue
		}
		mp := ManifestProject{Name: string(p), Root: "/" + t.loc.Root}
		v, from, err := t.Version(ctx)
		if err == nil && v != nil {
			mp.Version = source.VersionString(v)
		}
		mp.VersionFrom = from
		out = append(out, mp)
	}
	return out
}

// Cell is what one image is built from.
type Cell struct {
	ID      string // the cell id; names the image at the destination
	Patches []*patches.Patch
	Env     map[string]string
	Labels  map[string]string
}

// BuildOptions tune Build.
type BuildOptions struct {
	Strict        bool   // fuzzy hunks fail the cell
	CatalogDigest string // recorded in the manifest
	Tool          string // smpatch version, recorded in the manifest
}

// CellResult is one cell's build.
type CellResult struct {
	Built *Built
	Plans []*patches.Plan
}

// Build plans every patch of the cell on the base (each on the result of
// those before it, exactly as apply does on a checkout) and appends the
// patch layer. A patch that does not apply is an error with exit.Conflict;
// a base without the patch's project is an error wrapping ErrNoProject.
func (b *Base) Build(ctx context.Context, c Cell, opts BuildOptions) (*CellResult, error) {
	overlays := map[source.Project]*overlay{}
	var plans []*patches.Plan
	var mps []ManifestPatch
	touched := map[string][]string{} // project\x00rel -> patches
	for _, p := range c.Patches {
		t, err := b.Tree(p.Project)
		if err != nil {
			return nil, fmt.Errorf("patch %s: %w", p.Name, err)
		}
		ov := overlays[p.Project]
		if ov == nil {
			ov = newOverlay(t)
			overlays[p.Project] = ov
		}
		pl, err := patches.NewPlan(ctx, p, ov, patches.PlanOptions{Strict: opts.Strict})
		if err != nil {
			return nil, fmt.Errorf("patch %s: %w", p.Name, err)
		}
		plans = append(plans, pl)
		if !pl.OK(opts.Strict) {
			return &CellResult{Plans: plans}, exit.With(exit.Conflict, planError(pl, t))
		}
		mps = append(mps, ManifestPatch{Name: p.Name, Project: string(p.Project), Variant: patches.VariantLabel(pl.Variant), Outcome: string(pl.Outcome())})
		for rel, nb := range pl.Changes() {
			ov.set(rel, nb)
			k := string(p.Project) + "\x00" + rel
			touched[k] = append(touched[k], p.Name)
		}
	}
	var changes []Change
	for proj, ov := range overlays {
		for _, rel := range ov.changed() {
			ip, ok := ov.t.ImagePath(rel)
			if !ok {
				return nil, fmt.Errorf("%s: %s has no place in an installed %s", c.ID, rel, proj)
			}
			ip = b.FS.realPath(ip)
			old, err := ov.t.ReadFile(rel)
			if errors.Is(err, fs.ErrNotExist) {
				old = nil
			} else if err != nil {
				return nil, err
			}
			changes = append(changes, Change{Rel: rel, ImagePath: ip, Old: old, New: ov.files[rel], Patches: touched[string(proj)+"\x00"+rel]})
		}
	}
	tm, err := BuildTime()
	if err != nil {
		return nil, err
	}
	built, err := AppendPatchLayer(LayerInput{
		Base:    b.Image,
		BaseRef: b.Ref.Recorded(),
		FS:      b.FS,
		Cell:    c.ID,
		Changes: changes,
		Manifest: Manifest{
			Projects:      b.Projects(ctx),
			Patches:       mps,
			CatalogDigest: opts.CatalogDigest,
			Tool:          opts.Tool,
		},
		Env:        c.Env,
		Labels:     c.Labels,
		Time:       tm,
		SetCreated: envSet("SOURCE_DATE_EPOCH"),
	})
	if err != nil {
		return nil, err
	}
	return &CellResult{Built: built, Plans: plans}, nil
}

// planError says why a plan does not resolve, in one line.
func planError(pl *patches.Plan, t *Tree) error {
	what := "does not apply"
	switch pl.Outcome() {
	case patches.OutcomeConflict:
		what = "conflicts"
	case patches.OutcomeNoVariant:
		what = "has no variant for"
	case patches.OutcomeFuzzy:
		what = "only applies fuzzily (--strict) to"
	}
	ver := pl.Version
	if ver == "" {
		ver = "unknown version"
	}
	reason := pl.Reason
	if cs := pl.Conflicts(); len(cs) > 0 && reason == "" {
		h := cs[0]
		reason = fmt.Sprintf("%s: hunk %d: %s", h.Path, h.Index+1, h.Reason)
	}
	if reason == "" {
		reason = string(pl.Outcome())
	}
	return fmt.Errorf("patch %s %s %s %s in %s: %s", pl.Patch.Name, what, t.Project(), ver, t.Root(), reason)
}

// realPath resolves the directories of p through symlinks, so a layer
// entry lands where the base really keeps the file.
func (f *FS) realPath(p string) string {
	dir, base := splitDir(p)
	if n, _, err := f.resolve(dir, true); err == nil && dir != "" {
		return joinPath(n, base)
	}
	return p
}

func splitDir(p string) (string, string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

func joinPath(dir, base string) string {
	if dir == "" {
		return base
	}
	return dir + "/" + base
}

// overlay is a tree plus the changes of the patches planned so far.
type overlay struct {
	t     *Tree
	files map[string][]byte // rel -> bytes (nil: deleted)
}

func newOverlay(t *Tree) *overlay { return &overlay{t: t, files: map[string][]byte{}} }

func (o *overlay) set(rel string, b []byte) { o.files[rel] = b }

func (o *overlay) changed() []string {
	out := make([]string, 0, len(o.files))
	for rel, nb := range o.files {
		old, err := o.t.ReadFile(rel)
		if err == nil && nb != nil && string(old) == string(nb) {
			continue // a later patch restored it
		}
		if err != nil && nb == nil {
			continue // created, then deleted
		}
		out = append(out, rel)
	}
	sort.Strings(out)
	return out
}

func (o *overlay) Root() string            { return o.t.Root() }
func (o *overlay) Kind() source.Kind       { return o.t.Kind() }
func (o *overlay) Project() source.Project { return o.t.Project() }
func (o *overlay) Version(ctx context.Context) (*version.Version, string, error) {
	return o.t.Version(ctx)
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

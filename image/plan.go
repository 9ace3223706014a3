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
	// Platform is the image's platform, picked from a multi-platform
	// index or read from its config ("" when it names none).
	// PlatformDefault: the reference is an index and no platform was
	// asked for, so DefaultPlatform was picked.
	Platform        string
	PlatformDefault bool

	mu    sync.Mutex
	trees map[source.Project]*Tree
	errs  map[source.Project]error
}

// OpenBase opens and indexes a base image (one streaming pass over its
// layers, or their entry lists from the index cache).
func OpenBase(ctx context.Context, ref string, rem Remote, opts FSOptions) (*Base, error) {
	b, err := OpenImage(ctx, ref, rem)
	if err != nil {
		return nil, err
	}
	if err := b.Index(ctx, opts); err != nil {
		return nil, err
	}
	return b, nil
}

// OpenImage opens a base image without reading its layers: its manifest,
// config and platform are known, FS is nil until Index.
func OpenImage(ctx context.Context, ref string, rem Remote) (*Base, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	res, err := Resolve(ctx, r, rem)
	if err != nil {
		return nil, err
	}
	d, err := res.Image.Digest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return &Base{
		Ref: r, Image: res.Image, Digest: d, Platform: res.Platform, PlatformDefault: res.Defaulted,
		trees: map[source.Project]*Tree{}, errs: map[source.Project]error{},
	}, nil
}

// Index indexes the base's layers into FS; ctx stops the indexing and
// every later read of FS.
func (b *Base) Index(ctx context.Context, opts FSOptions) error {
	opts.diffOnly = b.Ref.Kind == "tarball"
	f, err := NewFS(ctx, b.Image, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", b.Ref.Raw, err)
	}
	b.FS = f
	return nil
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
// patch layer. A patch that does not apply is a *patches.Problem (with the
// plans made so far); a base without the patch's project is an error
// wrapping ErrNoProject.
func (b *Base) Build(ctx context.Context, c Cell, opts BuildOptions) (*CellResult, error) {
	// One set per project, in the order its first patch is named.
	byProject := map[source.Project][]*patches.Patch{}
	var order []source.Project
	for _, p := range c.Patches {
		if _, ok := byProject[p.Project]; !ok {
			order = append(order, p.Project)
		}
		byProject[p.Project] = append(byProject[p.Project], p)
	}
	var plans []*patches.Plan
	var changes []Change
	byName := map[string]ManifestPatch{}
	for _, proj := range order {
		t, err := b.Tree(proj)
		if err != nil {
			return nil, fmt.Errorf("patch %s: %w", byProject[proj][0].Name, err)
		}
		set, err := patches.PlanSet(ctx, t, byProject[proj], patches.SetOptions{Strict: opts.Strict})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.ID, err)
		}
		plans = append(plans, set.Plans...)
		if prob := set.Problem(); prob != nil {
			return &CellResult{Plans: plans}, prob
		}
		touched := map[string][]string{}
		for _, pl := range set.Plans {
			byName[pl.Patch.Name] = ManifestPatch{Name: pl.Patch.Name, Project: string(proj), Variant: patches.VariantLabel(pl.Variant), Outcome: string(pl.Outcome())}
			for rel := range pl.Changes() {
				touched[rel] = append(touched[rel], pl.Patch.Name)
			}
		}
		final := set.Changes()
		rels := make([]string, 0, len(final))
		for rel := range final {
			rels = append(rels, rel)
		}
		sort.Strings(rels)
		for _, rel := range rels {
			ip, ok := t.ImagePath(rel)
			if !ok {
				return nil, fmt.Errorf("%s: %s has no place in an installed %s", c.ID, rel, proj)
			}
			ip = b.FS.realPath(ip)
			old, err := t.ReadFile(rel)
			if errors.Is(err, fs.ErrNotExist) {
				old = nil
			} else if err != nil {
				return nil, err
			}
			changes = append(changes, Change{Rel: rel, ImagePath: ip, Old: old, New: final[rel], Patches: touched[rel]})
		}
	}
	var mps []ManifestPatch
	for _, p := range c.Patches {
		if mp, ok := byName[p.Name]; ok {
			mps = append(mps, mp)
			delete(byName, p.Name)
		}
	}
	tm, err := BuildTime()
	if err != nil {
		return nil, err
	}
	built, err := AppendPatchLayer(LayerInput{
		Base:         b.Image,
		BaseRef:      b.Ref.Recorded(),
		BasePlatform: b.Platform,
		FS:           b.FS,
		Cell:         c.ID,
		Changes:      changes,
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

package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/internal/textdist"
	"github.com/smpatch/smpatch/source"
)

// BuiltinOrigin is Patch.Origin for patches of the embedded catalog.
const BuiltinOrigin = "builtin"

// builtinDisplay is how errors name the embedded catalog's files.
const builtinDisplay = "patches/catalog"

// Catalog is the set of known patches: the built-in ones and those of user
// catalog directories.
type Catalog struct {
	byName map[string]*Patch
	all    []*Patch
	series []*Series // of the directories that have one, in their order
	digest string
}

// Load loads the built-in catalog, then each directory of dirs in order
// (New with the built-in catalog).
func Load(dirs []string) (*Catalog, error) { return New(Builtin(), dirs) }

// New loads the catalog builtin (its patches have origin BuiltinOrigin;
// nil: none), then each directory of dirs in order. A user patch that has
// a built-in's name must say `overrides = true`; two user patches of one
// name are an error. Every file gets every check, the built-in ones too.
func New(builtin fs.FS, dirs []string) (*Catalog, error) {
	c := &Catalog{byName: map[string]*Patch{}}
	if builtin != nil {
		ps, s, err := loadFS(builtin, builtinDisplay, BuiltinOrigin)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			c.byName[p.Name] = p
		}
		if s != nil {
			c.series = append(c.series, s)
		}
	}
	if len(dirs) > MaxCatalogs {
		return nil, fmt.Errorf("catalog: %d directories, more than the %d one command loads", len(dirs), MaxCatalogs)
	}
	var loaded []os.FileInfo
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil {
			return nil, fmt.Errorf("catalog %s: %w", d, err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("catalog %s: not a directory", d)
		}
		// One directory named twice (--catalog and $SMPATCH_CATALOG, or
		// through a symlink) is one catalog, not two with clashing names.
		if slices.ContainsFunc(loaded, func(o os.FileInfo) bool { return os.SameFile(o, st) }) {
			continue
		}
		loaded = append(loaded, st)
		ps, s, err := loadDir(d)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if old, ok := c.byName[p.Name]; ok {
				if old.Origin != BuiltinOrigin {
					return nil, fmt.Errorf("%s: patch %q is also defined in %s: one name, one patch (rename one, or leave one directory out)", p.nameAt(), p.Name, old.nameAt())
				}
				if !p.Overrides {
					return nil, fmt.Errorf("%s: patch %q has the name of a built-in patch; add `overrides = true` to replace it", p.nameAt(), p.Name)
				}
			}
			c.byName[p.Name] = p
		}
		if s != nil {
			c.series = append(c.series, s)
		}
	}
	for _, p := range c.byName {
		c.all = append(c.all, p)
	}
	sort.Slice(c.all, func(i, j int) bool { return c.all[i].Name < c.all[j].Name })
	if err := c.resolveNeeds(); err != nil {
		return nil, err
	}
	h := sha256.New()
	for _, p := range c.all {
		fmt.Fprintf(h, "%s\x00%s\x00", p.Name, p.Digest)
	}
	c.digest = hex.EncodeToString(h.Sum(nil))
	return c, nil
}

// All returns every patch, sorted by name.
func (c *Catalog) All() []*Patch { return append([]*Patch(nil), c.all...) }

// Digest is a sha256 over every patch's files; the journal records it.
func (c *Catalog) Digest() string { return c.digest }

// ForProject returns the patches of project p, sorted by name.
func (c *Catalog) ForProject(p source.Project) []*Patch {
	var out []*Patch
	for _, x := range c.all {
		if x.Project == p {
			out = append(out, x)
		}
	}
	return out
}

// Lookup returns the patch called name, if the catalog has one.
func (c *Catalog) Lookup(name string) (*Patch, bool) {
	p, ok := c.byName[name]
	return p, ok
}

// Get returns the patch called name, or an error that suggests the nearest
// known name.
func (c *Catalog) Get(name string) (*Patch, error) {
	if p, ok := c.byName[name]; ok {
		return p, nil
	}
	msg := fmt.Sprintf("unknown patch %q", name)
	if s := c.suggest(name); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	} else if len(c.all) == 0 {
		msg += " (the catalog is empty)"
	} else {
		msg += " (see smpatch list)"
	}
	return nil, errors.New(msg)
}

func (c *Catalog) suggest(name string) string {
	// A unique patch whose name contains what was typed ("sm120").
	if len(name) >= 3 {
		var hits []string
		for _, p := range c.all {
			if strings.Contains(strings.ToLower(p.Name), strings.ToLower(name)) {
				hits = append(hits, p.Name)
			}
		}
		if len(hits) == 1 {
			return hits[0]
		}
	}
	best, bestD := "", -1
	for _, p := range c.all {
		d := textdist.Distance(strings.ToLower(name), strings.ToLower(p.Name))
		if bestD < 0 || d < bestD {
			best, bestD = p.Name, d
		}
	}
	limit := max(2, len(name)/3)
	if bestD < 0 || bestD > limit {
		return ""
	}
	return best
}

// LoadFS loads every NAME.toml at the top of fsys. display is how errors
// name the directory; origin goes into Patch.Origin.
func LoadFS(fsys fs.FS, display, origin string) ([]*Patch, error) {
	ps, _, err := loadFS(fsys, display, origin)
	return ps, err
}

// loadDir loads the catalog directory d through an os.Root: no name it
// holds (a diff's path, a symbolic link) reaches outside it.
func loadDir(d string) ([]*Patch, *Series, error) {
	root, err := os.OpenRoot(d)
	if err != nil {
		return nil, nil, fmt.Errorf("catalog %s: %w", d, err)
	}
	defer root.Close()
	return loadFS(root.FS(), strings.TrimSuffix(d, "/"), d)
}

// loadFS loads the patches of one catalog directory and its series (nil
// when it has none), within the bounds of bounds.go.
func loadFS(fsys fs.FS, display, origin string) ([]*Patch, *Series, error) {
	all, err := topNames(fsys, display)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, n := range all {
		if strings.HasSuffix(n, ".toml") {
			names = append(names, n)
		}
	}
	if len(names) > MaxPatches {
		return nil, nil, fmt.Errorf("%s: %d NAME.toml files, more than the %d a catalog directory may have", display, len(names), MaxPatches)
	}
	sort.Strings(names)
	bud := &budget{dir: display, left: MaxCatalogBytes}
	var out []*Patch
	for _, n := range names {
		p, err := loadPatch(fsys, display, origin, n, bud)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, p)
	}
	s, err := dirSeries(fsys, display, out, bud)
	if err != nil {
		return nil, nil, err
	}
	return out, s, nil
}

// resolveNeeds points every patch's needs at the patches of the catalog
// and refuses a name the catalog lacks, a patch of another project, and a
// cycle, naming the file and line of the "needs" key.
func (c *Catalog) resolveNeeds() error {
	line := func(p *Patch) string {
		if p.needsLine != nil {
			if n := p.needsLine(); n > 0 {
				return fmt.Sprintf("%s:%d", p.File, n)
			}
		}
		return p.File
	}
	for _, p := range c.all {
		p.needed = nil
		for _, n := range p.Needs {
			q, ok := c.byName[n]
			if !ok {
				return fmt.Errorf("%s: needs %q, which is not in the catalog", line(p), n)
			}
			if q.Project != p.Project {
				return fmt.Errorf("%s: needs %q, a %s patch; a patch can only need patches of its own project (%s)", line(p), n, q.Project, p.Project)
			}
			p.needed = append(p.needed, q)
		}
	}
	// A cycle would make every patch on it wait for the others.
	const (
		unseen = iota
		visiting
		done
	)
	state := map[*Patch]int{}
	var visit func(p *Patch, path []string) error
	visit = func(p *Patch, path []string) error {
		switch state[p] {
		case visiting:
			return fmt.Errorf("%s: needs form a cycle: %s", line(p), strings.Join(append(path, p.Name), " -> "))
		case done:
			return nil
		}
		state[p] = visiting
		for _, q := range p.needed {
			if err := visit(q, append(path, p.Name)); err != nil {
				return err
			}
		}
		state[p] = done
		return nil
	}
	for _, p := range c.all {
		if err := visit(p, nil); err != nil {
			return err
		}
	}
	return nil
}

// GetAll looks up the named patches for one set: each once, in the order
// first named, all of one project (a set patches one tree).
func (c *Catalog) GetAll(names []string) ([]*Patch, error) {
	var ps []*Patch
	seen := map[string]bool{}
	for _, n := range names {
		p, err := c.Get(n)
		if err != nil {
			return nil, err
		}
		if seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		if len(ps) > 0 && p.Project != ps[0].Project {
			return nil, fmt.Errorf("%s is a %s patch and %s a %s patch: apply them separately", ps[0].Name, ps[0].Project, p.Name, p.Project)
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("no patch named")
	}
	return NeedsFirst(ps), nil
}

// NeedsFirst orders a set so that a patch comes after the patches of the
// set it needs, keeping the order given otherwise.
func NeedsFirst(ps []*Patch) []*Patch {
	in := map[string]*Patch{}
	for _, p := range ps {
		in[p.Name] = p
	}
	out := make([]*Patch, 0, len(ps))
	placed := map[string]bool{}
	var place func(p *Patch)
	place = func(p *Patch) {
		if placed[p.Name] {
			return
		}
		placed[p.Name] = true // the catalog refuses cycles
		for _, n := range p.Needs {
			if q, ok := in[n]; ok {
				place(q)
			}
		}
		out = append(out, p)
	}
	for _, p := range ps {
		place(p)
	}
	return out
}

package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/source"
)

// ErrNoProject is returned when an image does not hold the project asked for.
var ErrNoProject = errors.New("project not found in the image")

// Location is where a project lives in an image.
type Location struct {
	Project source.Project
	// Dist is the installed distribution (nil when only the package
	// directory was found).
	Dist *source.Dist
	// SitePackages is the site-packages directory the project was found
	// through ("usr/local/lib/python3.12/dist-packages").
	SitePackages string
	// Root is the directory repository-relative paths hang from: for a
	// package install the site-packages directory (paths map through the
	// package root, python/sglang/x -> sglang/x); for an editable install
	// (Checkout) the source checkout in the image (/sgl-workspace/sglang).
	Root     string
	Checkout bool
}

// distNames are the distribution names a project is published under.
var distNames = map[source.Project][]string{
	source.SGLang:     {"sglang"},
	source.FlashInfer: {"flashinfer-python", "flashinfer"},
}

// rankSitePackages orders site-packages directories roughly as an image's
// interpreter would search them: virtual environments and conda first,
// then /usr/local, then the distribution's /usr/lib.
func rankSitePackages(dirs []string) []string {
	rank := func(d string) int {
		switch {
		case strings.HasPrefix(d, "usr/lib/"):
			return 2
		case strings.HasPrefix(d, "usr/local/"):
			return 1
		}
		return 0
	}
	out := append([]string(nil), dirs...)
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := rank(out[i]), rank(out[j])
		if ri != rj {
			return ri < rj
		}
		return out[i] < out[j]
	})
	return out
}

// Locate finds project p in the image: its distribution through dist-info
// (source.FindDistFS), an editable install through direct_url.json, or else
// the bare package directory.
func Locate(f *FS, p source.Project) (*Location, error) {
	pkg := string(p)
	sps := f.SitePackages()
	for _, sp := range sps {
		for _, dn := range distNames[p] {
			d, err := source.FindDistFS(f, []string{sp}, dn)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if loc := editable(f, p, d); loc != nil {
				loc.SitePackages = sp
				return loc, nil
			}
			if f.isFile(path.Join(sp, pkg, "__init__.py")) {
				return &Location{Project: p, Dist: d, SitePackages: sp, Root: sp}, nil
			}
		}
	}
	for _, sp := range sps {
		if f.isFile(path.Join(sp, pkg, "__init__.py")) {
			return &Location{Project: p, SitePackages: sp, Root: sp}, nil
		}
	}
	// Older editable installs (setup.py develop) leave only a path in a
	// .pth or .egg-link file.
	for _, sp := range sps {
		for _, pat := range []string{"*.egg-link", "*.pth"} {
			for _, file := range f.Glob(sp, pat) {
				b, err := f.ReadFile(file)
				if err != nil {
					continue
				}
				for _, line := range strings.Split(string(b), "\n") {
					dir := strings.TrimSpace(line)
					if !strings.HasPrefix(dir, "/") || !f.isFile(path.Join(cleanName(dir), pkg, "__init__.py")) {
						continue
					}
					loc := &Location{Project: p, SitePackages: sp, Root: cleanName(dir)}
					if p == source.SGLang && path.Base(loc.Root) == "python" {
						loc.Root, loc.Checkout = path.Dir(loc.Root), true
					} else if p == source.FlashInfer {
						loc.Checkout = true
					}
					return loc, nil
				}
			}
		}
	}
	where := "no site-packages directory in the image"
	if len(sps) > 0 {
		where = "searched " + strings.Join(sps, ", ")
	}
	return nil, fmt.Errorf("%s: %w (%s)", p, ErrNoProject, where)
}

func (f *FS) isFile(name string) bool {
	_, e, err := f.resolve(cleanName(name), true)
	return err == nil && !e.isDir()
}

// editable reads the dist's direct_url.json (PEP 610); an editable install
// from a file:// URL holding the package is a checkout in the image.
func editable(f *FS, p source.Project, d *source.Dist) *Location {
	b, err := f.ReadFile(cleanName(path.Join(d.DistInfo, "direct_url.json")))
	if err != nil {
		return nil
	}
	editable, ok := source.EditableDir(b)
	if !ok {
		return nil
	}
	dir := cleanName(editable)
	if !f.isFile(path.Join(dir, string(p), "__init__.py")) {
		return nil
	}
	loc := &Location{Project: p, Dist: d, Checkout: true, Root: dir}
	if p == source.SGLang {
		// sglang installs from python/ of its repository.
		if path.Base(dir) != "python" {
			return &Location{Project: p, Dist: d, Root: dir}
		}
		loc.Root = path.Dir(dir)
	}
	return loc
}

// Tree is a project found in an image, as a source.Tree: the same Plan
// that runs on a checkout runs on it.
type Tree struct {
	fs   *FS
	loc  *Location
	name string
}

var _ source.Tree = (*Tree)(nil)

// NewTree serves the project at loc. name is what Root reports
// ("lmsysorg/sglang:v0.5.9@sha256:...").
func NewTree(f *FS, loc *Location, name string) *Tree {
	return &Tree{fs: f, loc: loc, name: name}
}

func (t *Tree) Root() string            { return t.name }
func (t *Tree) Kind() source.Kind       { return source.KindImage }
func (t *Tree) Project() source.Project { return t.loc.Project }
func (t *Tree) Location() *Location     { return t.loc }
func (t *Tree) FS() *FS                 { return t.fs }

// ImagePath maps a repository-relative path to its path in the image.
func (t *Tree) ImagePath(rel string) (string, bool) {
	rel = cleanName(rel)
	if t.loc.Checkout {
		return path.Join(t.loc.Root, rel), true
	}
	pp, ok := repoToPackage(t.loc.Project, rel)
	if !ok {
		return "", false
	}
	return path.Join(t.loc.Root, pp), true
}

// RepoPath maps a path in the image back to a repository-relative one.
func (t *Tree) RepoPath(p string) (string, bool) {
	p = cleanName(p)
	rel, ok := strings.CutPrefix(p, t.loc.Root+"/")
	if !ok {
		return "", false
	}
	if t.loc.Checkout {
		return rel, true
	}
	return packageToRepo(t.loc.Project, rel)
}

// repoToPackage maps a repository path to its path under site-packages.
func repoToPackage(p source.Project, rel string) (string, bool) {
	switch p {
	case source.SGLang:
		if r, ok := strings.CutPrefix(rel, "python/sglang/"); ok {
			return "sglang/" + r, true
		}
	case source.FlashInfer:
		if r, ok := strings.CutPrefix(rel, "include/"); ok {
			return "flashinfer/data/include/" + r, true
		}
		if strings.HasPrefix(rel, "flashinfer/") {
			return rel, true
		}
	}
	return "", false
}

func packageToRepo(p source.Project, rel string) (string, bool) {
	switch p {
	case source.SGLang:
		if strings.HasPrefix(rel, "sglang/") {
			return "python/" + rel, true
		}
	case source.FlashInfer:
		if r, ok := strings.CutPrefix(rel, "flashinfer/data/include/"); ok {
			return "include/" + r, true
		}
		if strings.HasPrefix(rel, "flashinfer/") {
			return rel, true
		}
	}
	return "", false
}

// ReadFile implements source.Tree.
func (t *Tree) ReadFile(rel string) ([]byte, error) {
	p, ok := t.ImagePath(rel)
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: fs.ErrNotExist}
	}
	b, err := t.fs.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s (in the image at /%s): %w", rel, p, errors.Unwrap(err))
	}
	return b, nil
}

// ListFiles implements source.Tree. __pycache__ directories are skipped.
func (t *Tree) ListFiles(dir string) ([]string, error) {
	dir = cleanName(dir)
	var roots []string
	switch {
	case t.loc.Checkout:
		roots = []string{path.Join(t.loc.Root, dir)}
	case dir == "":
		roots = []string{path.Join(t.loc.Root, string(t.loc.Project))}
	default:
		p, ok := t.ImagePath(dir + "/x")
		if !ok {
			// A parent of the package ("python"): list the whole package.
			pr := map[source.Project]string{source.SGLang: "python/sglang", source.FlashInfer: "flashinfer"}[t.loc.Project]
			if strings.HasPrefix(pr, dir+"/") {
				return t.ListFiles(pr)
			}
			return nil, nil
		}
		roots = []string{path.Dir(p)}
	}
	var out []string
	for _, r := range roots {
		t.fs.walkFiles(r, func(p string) {
			if rel, ok := t.RepoPath(p); ok {
				out = append(out, rel)
			}
		})
	}
	sort.Strings(out)
	return out, nil
}

// walkFiles calls fn for every regular file under dir (not following
// symlinks), skipping __pycache__.
func (f *FS) walkFiles(dir string, fn func(string)) {
	for _, c := range f.dirs[dir] {
		p := path.Join(dir, c)
		e := f.entries[p]
		switch {
		case e.isDir():
			if c != "__pycache__" {
				f.walkFiles(p, fn)
			}
		case e.typ != tar.TypeSymlink:
			fn(p)
		}
	}
}

var versionLiteral = lazyre.New(`(?m)^__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']`)

// versionFiles hold a version literal in some shapes of each project.
var versionFiles = map[source.Project][]string{
	source.SGLang:     {"python/sglang/version.py"},
	source.FlashInfer: {"flashinfer/version.py", "flashinfer/_build_meta.py"},
}

// Version implements source.Tree: a version literal in the project's
// sources, else the installed distribution's METADATA.
func (t *Tree) Version(ctx context.Context) (*version.Version, string, error) {
	for _, f := range versionFiles[t.loc.Project] {
		b, err := t.ReadFile(f)
		if err != nil {
			continue
		}
		if m := versionLiteral().FindSubmatch(b); m != nil {
			v, err := parseVersion(string(m[1]))
			if err != nil {
				return nil, fmt.Sprintf("%s: %v", f, err), nil
			}
			return v, f, nil
		}
	}
	if d := t.loc.Dist; d != nil && d.Version != "" {
		v, err := parseVersion(d.Version)
		if err != nil {
			return nil, fmt.Sprintf("%s/METADATA: %v", d.DistInfo, err), nil
		}
		return v, "dist-info METADATA (" + path.Base(d.DistInfo) + ")", nil
	}
	return nil, "no version literal and no dist-info in the image", nil
}

// parseVersion reads a PEP 440 version.
var parseVersion = source.ParseVersion

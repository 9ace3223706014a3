package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/internal/bounded"
)

// Editable installs. An editable install leaves in site-packages not the
// package but a pointer to a checkout, one of:
//
//   - a dist-info whose direct_url.json says editable (PEP 610, pip install -e)
//   - a .pth file with the checkout's package directory on a line of its
//     own (setuptools' __editable__.NAME-VERSION.pth in lenient mode, uv,
//     hatch, conda develop, or written by hand), no direct_url.json needed
//   - a .pth that imports a finder module __editable___NAME_VERSION_finder.py
//     whose MAPPING names the package's directory (setuptools >= 64, strict)
//   - NAME.egg-link (setup.py develop, pip install -e with old setuptools),
//     whose first line is the checkout's package directory
//
// FindEditable follows each to a checkout of the project and says which
// file led there.

// Editable is an editable install of a project: the checkout it points at
// and the file in site-packages that says so.
type Editable struct {
	Checkout     string // the checkout's root
	SitePackages string // the site-packages directory holding the pointer
	Via          string // the pointer, a path inside SitePackages
}

// String says where the tree came from, for people.
func (e *Editable) String() string {
	return fmt.Sprintf("the editable install in %s (%s) points here", e.SitePackages, e.Via)
}

// Bounds on what is read looking for editable installs: real .pth files
// are a line or two, finder modules a few kB.
const (
	maxPointerBytes = 64 << 10
	maxPthFiles     = 256
)

var (
	finderImport = regexp.MustCompile(`^import\s+(__editable___[A-Za-z0-9_]+_finder)\b`)
	finderMap    = regexp.MustCompile(`(?m)^MAPPING\s*(?::[^=\n]*)?=\s*\{([^\n}]*)\}`)
	mapEntry     = regexp.MustCompile(`['"]([^'"]+)['"]\s*:\s*['"]([^'"]+)['"]`)
)

// FindEditable looks in the site-packages directories, first first, for an
// editable install of p that points at a checkout of p; nil without error
// when there is none.
func FindEditable(sitePackages []string, p Project) (*Editable, error) {
	pkg, ok := packageDir(p)
	if !ok {
		return nil, fmt.Errorf("unknown project %q", p)
	}
	for _, sp := range sitePackages {
		e, err := findEditableIn(sp, p, pkg)
		if err != nil || e != nil {
			return e, err
		}
	}
	return nil, nil
}

func findEditableIn(sp string, p Project, pkg string) (*Editable, error) {
	ents, err := os.ReadDir(sp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	found := func(dir, via string) *Editable {
		if root, ok := checkoutOf(dir, p); ok {
			return &Editable{Checkout: root, SitePackages: sp, Via: via}
		}
		return nil
	}
	// direct_url.json first: it names the install exactly.
	if d, err := FindDist([]string{sp}, DistName(p)); err == nil && d != nil {
		if data, err := bounded.ReadFile(nil, filepath.Join(d.DistInfo, "direct_url.json"), maxPointerBytes); err == nil {
			if dir, ok := EditableDir(data); ok {
				if e := found(filepath.FromSlash(dir), filepath.Base(d.DistInfo)+"/direct_url.json"); e != nil {
					return e, nil
				}
			}
		}
	}
	var pths, links []string
	for _, de := range ents {
		n := de.Name()
		switch {
		case strings.HasSuffix(n, ".pth"):
			pths = append(pths, n)
		case strings.HasSuffix(n, ".egg-link"):
			links = append(links, n)
		}
	}
	// Files named for the project first (__editable__.sglang-..., sglang.egg-link).
	byName := func(names []string) {
		sort.SliceStable(names, func(i, j int) bool {
			return strings.Contains(strings.ToLower(names[i]), pkg) && !strings.Contains(strings.ToLower(names[j]), pkg)
		})
	}
	byName(pths)
	byName(links)
	if len(pths) > maxPthFiles {
		pths = pths[:maxPthFiles]
	}
	for _, n := range pths {
		data, err := bounded.ReadFile(nil, filepath.Join(sp, n), maxPointerBytes)
		if err != nil {
			continue // a .pth smpatch cannot read is no pointer it can follow
		}
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if m := finderImport.FindStringSubmatch(line); m != nil {
				if dir, ok := finderPath(sp, m[1], pkg); ok {
					if e := found(dir, n+" -> "+m[1]+".py"); e != nil {
						return e, nil
					}
				}
				continue
			}
			if strings.HasPrefix(line, "import ") || strings.HasPrefix(line, "import\t") {
				continue
			}
			dir := line
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(sp, dir)
			}
			if e := found(dir, n); e != nil {
				return e, nil
			}
		}
	}
	for _, n := range links {
		data, err := bounded.ReadFile(nil, filepath.Join(sp, n), maxPointerBytes)
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(string(data), "\n")
		if dir := strings.TrimSpace(first); dir != "" {
			if e := found(dir, n); e != nil {
				return e, nil
			}
		}
	}
	return nil, nil
}

// finderPath is the directory a setuptools finder module's MAPPING gives
// the package pkg.
func finderPath(sp, module, pkg string) (string, bool) {
	data, err := bounded.ReadFile(nil, filepath.Join(sp, module+".py"), maxPointerBytes)
	if err != nil {
		return "", false
	}
	m := finderMap.FindSubmatch(data)
	if m == nil {
		return "", false
	}
	for _, e := range mapEntry.FindAllSubmatch(m[1], -1) {
		if string(e[1]) == pkg {
			return string(e[2]), true
		}
	}
	return "", false
}

// checkoutOf is the checkout of p a pointer's directory dir belongs to:
// dir itself (a checkout), its parent (sglang's CHECKOUT/python), or the
// parent of that (the package directory itself, CHECKOUT/python/sglang).
func checkoutOf(dir string, p Project) (string, bool) {
	dir = filepath.Clean(dir)
	for _, c := range []string{dir, filepath.Dir(dir), filepath.Dir(filepath.Dir(dir))} {
		if got, ok := DetectCheckout(c); ok && got == p {
			root, err := cleanRoot(c)
			if err != nil {
				return "", false
			}
			return root, true
		}
	}
	return "", false
}

package compat

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/source"
)

// The distributions of flashinfer a pin names, in PEP 503 form.
const (
	distPython   = "flashinfer-python"
	distCubin    = "flashinfer-cubin"
	distJITCache = "flashinfer-jit-cache"
)

// ReadPyprojectPin reads the flashinfer requirements of a pyproject.toml
// (file is the path shown in From: "python/pyproject.toml"): the
// [project] dependencies, else an optional-dependencies group. A file that
// is not TOML is an error; one without flashinfer gives an empty Pin.
func ReadPyprojectPin(data []byte, file string) (Pin, error) {
	var doc struct {
		Project struct {
			Dependencies         []string            `toml:"dependencies"`
			OptionalDependencies map[string][]string `toml:"optional-dependencies"`
		} `toml:"project"`
	}
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return Pin{}, fmt.Errorf("%s: %w", file, err)
	}
	lines := strings.Split(string(data), "\n")
	lineOf := func(req string) string {
		for i, l := range lines {
			if strings.Contains(l, `"`+req+`"`) || strings.Contains(l, `'`+req+`'`) {
				return fmt.Sprintf("%s:%d", file, i+1)
			}
		}
		return file
	}
	var p Pin
	groups := [][]string{doc.Project.Dependencies}
	for _, g := range slices.Sorted(maps.Keys(doc.Project.OptionalDependencies)) {
		groups = append(groups, doc.Project.OptionalDependencies[g])
	}
	for _, reqs := range groups {
		for _, req := range reqs {
			p.take(req, lineOf(req))
		}
	}
	return p, nil
}

// PinFromRequires reads the flashinfer requirements of an installed
// distribution's Requires-Dist values (from is where they were read: a
// METADATA file).
func PinFromRequires(reqs []string, from string) Pin {
	var p Pin
	for _, r := range reqs {
		p.take(r, from)
	}
	return p
}

// take records requirement req, read at from, when it names a flashinfer
// distribution not seen yet.
func (p *Pin) take(req, from string) {
	name, ver, exact := ParseRequirement(req)
	switch name {
	case distPython:
		if p.Spec == "" {
			p.Spec, p.FlashInferFrom = strings.TrimSpace(req), from
			if exact {
				p.FlashInfer = ver
			}
		}
	case distCubin:
		if p.Cubin == "" && exact {
			p.Cubin, p.CubinFrom = ver, from
		}
	case distJITCache:
		if p.JITCache == "" && exact {
			p.JITCache, p.JITCacheFrom = ver, from
		}
	}
}

var reqNameRe = lazyre.New(`^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(\(?)([^;]*?)\)?\s*(;.*)?$`)

// ParseRequirement reads a PEP 508 requirement: the distribution's name in
// PEP 503 form, and the version when the requirement is one exact `==X`
// (or `===X`) comparison.
func ParseRequirement(req string) (name, version string, exact bool) {
	m := reqNameRe().FindStringSubmatch(req)
	if m == nil {
		return "", "", false
	}
	name = source.NormalizeDistName(m[1])
	spec := strings.TrimSpace(m[4])
	if strings.Contains(spec, ",") {
		return name, "", false
	}
	v, ok := strings.CutPrefix(spec, "===")
	if !ok {
		if v, ok = strings.CutPrefix(spec, "=="); !ok {
			return name, "", false
		}
	}
	v = strings.TrimSpace(v)
	if strings.HasSuffix(v, ".*") {
		return name, "", false
	}
	if _, err := source.ParseVersion(v); err != nil {
		return name, "", false
	}
	return name, v, true
}

var (
	dockerArgRe     = lazyre.New(`^\s*ARG\s+FLASHINFER_VERSION\s*=\s*"?([^\s"]+)"?\s*$`)
	dockerInstallRe = lazyre.New(`(flashinfer[-_](?:jit[-_]cache|cubin))\s*==\s*"?\$\{?FLASHINFER_VERSION\}?`)
)

// ReadDockerfilePin adds to p what a Dockerfile (file: the path shown)
// installs beside sglang: flashinfer-jit-cache and flashinfer-cubin at
// ${FLASHINFER_VERSION}, its ARG's default. A pin p already has stays.
func ReadDockerfilePin(p *Pin, data []byte, file string) {
	ver, verLine := "", 0
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if m := dockerArgRe().FindStringSubmatch(l); m != nil && ver == "" {
			ver, verLine = m[1], i+1
		}
	}
	if ver == "" {
		return
	}
	if _, err := source.ParseVersion(ver); err != nil {
		return
	}
	for i, l := range lines {
		m := dockerInstallRe().FindStringSubmatch(l)
		if m == nil {
			continue
		}
		from := fmt.Sprintf("%s:%d (ARG FLASHINFER_VERSION at line %d)", file, i+1, verLine)
		switch source.NormalizeDistName(m[1]) {
		case distJITCache:
			if p.JITCache == "" {
				p.JITCache, p.JITCacheFrom = ver, from
			}
		case distCubin:
			if p.Cubin == "" {
				p.Cubin, p.CubinFrom = ver, from
			}
		}
	}
}

// ReadTreePin reads the flashinfer pin of an sglang tree: an installed
// package's METADATA (Requires-Dist) in site-packages, else the tree's
// python/pyproject.toml and docker/Dockerfile. A tree that names none gives
// an empty Pin; a file that cannot be read or parsed is an error.
func ReadTreePin(t source.Tree) (Pin, error) {
	if t.Kind() == source.KindSitePackages {
		d, err := source.FindDist([]string{t.Root()}, "sglang")
		if errors.Is(err, fs.ErrNotExist) {
			return Pin{}, nil
		}
		if err != nil {
			return Pin{}, err
		}
		return PinFromRequires(d.Metadata["Requires-Dist"], filepath.Base(d.DistInfo)+"/METADATA"), nil
	}
	var p Pin
	data, err := t.ReadFile("python/pyproject.toml")
	switch {
	case err == nil:
		if p, err = ReadPyprojectPin(data, "python/pyproject.toml"); err != nil {
			return Pin{}, err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return Pin{}, err
	}
	if data, err := t.ReadFile("docker/Dockerfile"); err == nil {
		ReadDockerfilePin(&p, data, "docker/Dockerfile")
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Pin{}, err
	}
	return p, nil
}

package patches

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/internal/textdist"
	"github.com/smpatch/smpatch/internal/tomlfile"
	"github.com/smpatch/smpatch/patches/internal/catalogfile"
	"github.com/smpatch/smpatch/patches/udiff"
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
	digest string
}

// LoadCatalog loads the built-in catalog, then each directory of dirs in
// order. A user patch that has a built-in's name must say `overrides = true`;
// two user patches of one name are an error.
//
// The built-in catalog is compiled in: the checks that only prove its
// texts right (version ranges that parse, variants that do not
// overlap, uncovered patterns that compile, requirement versions that
// parse) are made by its tests (TestBuiltinCatalogFullyChecked), not by
// every command. Catalogs read from directories get every check.
//
// The built-in catalog's NAME.toml files are decoded, its diffs parsed and
// its patches' digests computed when the program is built
// (builtin_decoded.go, written by `go generate ./patches`): each command
// takes those values instead of decoding, parsing and hashing again, and
// checks and derives the patch from them as from a decoded file. A file
// whose embedded text is not the copy the values were generated from is
// decoded, parsed and hashed as usual. The variants' version ranges are
// left as text (Variant.Constraints is nil), read when a variant is chosen.
func LoadCatalog(dirs []string) (*Catalog, error) {
	return loadCatalogFrom(builtinCatalog(), builtinPrebuilt(), dirs, false)
}

func loadCatalog(builtin fs.FS, dirs []string) (*Catalog, error) {
	return loadCatalogChecked(builtin, dirs, true)
}

// loadCatalogChecked is loadCatalog; checkBuiltin says whether the
// built-in catalog gets the checks its tests already make.
func loadCatalogChecked(builtin fs.FS, dirs []string, checkBuiltin bool) (*Catalog, error) {
	return loadCatalogFrom(builtin, nil, dirs, checkBuiltin)
}

// loadCatalogFrom is loadCatalogChecked; pre holds the built-in catalog
// derived ahead of time (nil: decode, parse and hash it all).
func loadCatalogFrom(builtin fs.FS, pre *prebuilt, dirs []string, checkBuiltin bool) (*Catalog, error) {
	c := &Catalog{byName: map[string]*Patch{}}
	ps, err := loadCatalogFS(builtin, builtinDisplay, BuiltinOrigin, checkBuiltin, pre)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		c.byName[p.Name] = p
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
		ps, err := LoadCatalogFS(os.DirFS(d), strings.TrimSuffix(d, "/"), d)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if old, ok := c.byName[p.Name]; ok {
				if old.Origin != BuiltinOrigin {
					return nil, fmt.Errorf("%s: patch %q is also defined in %s", p.File, p.Name, old.File)
				}
				if !p.Overrides {
					return nil, fmt.Errorf("%s: patch %q has the name of a built-in patch; add `overrides = true` to replace it", p.File, p.Name)
				}
			}
			c.byName[p.Name] = p
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

// LoadCatalogFS loads every NAME.toml at the top of fsys. display is how
// errors name the directory; origin goes into Patch.Origin.
func LoadCatalogFS(fsys fs.FS, display, origin string) ([]*Patch, error) {
	return loadCatalogFS(fsys, display, origin, true, nil)
}

// loadCatalogFS is LoadCatalogFS; full is false only for the built-in
// catalog, whose tests make the checks that only prove its texts right;
// pre holds files decoded ahead of time (see loadPatch).
func loadCatalogFS(fsys fs.FS, display, origin string, full bool, pre *prebuilt) ([]*Patch, error) {
	names, err := fs.Glob(fsys, "*.toml")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", display, err)
	}
	sort.Strings(names)
	var out []*Patch
	for _, n := range names {
		p, err := loadPatch(fsys, display, origin, n, full, pre)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

var upstreamStat = map[string]bool{"": true, "proposed": true, "merged": true, "rejected": true, "local": true}

// loader carries one file's context for error messages.
type loader struct {
	fsys    fs.FS
	display string // directory as errors name it
	file    string // display path of the TOML file
	data    []byte
	// full: every check, including those that only prove a catalog's
	// texts right (false for the built-in catalog, see LoadCatalog).
	full bool
	// keys are data's lines as keyLine reads them, parsed once.
	keys []keyLineInfo
	// pre is what was derived ahead of time (see LoadCatalog), or nil.
	pre *prebuilt
	// digested are the texts the patch's digest covers, in order:
	// name, then text, for the TOML and each diff.
	digested [][]byte
	// parsedAll: every diff's FileDiffs came from pre.
	parsedAll bool
}

func (l *loader) errf(line int, format string, args ...any) error {
	if line > 0 {
		return fmt.Errorf("%s:%d: %s", l.file, line, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%s: %s", l.file, fmt.Sprintf(format, args...))
}

// line finds the line of key in table (index idx of an array table, -1
// otherwise), or the table's header line when key is "", or 0.
func (l *loader) line(table string, idx int, key string) int {
	if l.keys == nil {
		l.keys = parseKeyLines(l.data)
	}
	return findKeyLine(l.keys, table, idx, key)
}

// loadPatch reads the NAME.toml called name, decodes it (or takes pre's
// value for it when that was decoded from this very text), then checks it
// and derives the patch.
func loadPatch(fsys fs.FS, display, origin, name string, full bool, pre *prebuilt) (*Patch, error) {
	l := &loader{fsys: fsys, display: display, file: display + "/" + name, full: full, pre: pre}
	data, err := tomlfile.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.file, err)
	}
	l.data = data
	dec, ok := predecoded(pre, name, data)
	pf := dec.Patch
	if !ok {
		pf, err = catalogfile.Decode(l.file, data, func(k toml.Key) int { return undecodedLine(data, k) })
		if err != nil {
			return nil, err
		}
	}
	stem := strings.TrimSuffix(name, ".toml")
	p := &Patch{
		Name:      pf.Name,
		Project:   source.Project(pf.Project),
		Summary:   pf.Summary,
		Links:     pf.Links,
		Origin:    origin,
		File:      l.file,
		Overrides: pf.Overrides,
	}
	if pf.Name == "" {
		return nil, l.errf(1, "missing key \"name\"")
	}
	if pf.Name != stem {
		return nil, l.errf(l.line("", -1, "name"), "name %q does not match the file name %q", pf.Name, stem+".toml")
	}
	if !validPatchName(pf.Name) {
		return nil, l.errf(l.line("", -1, "name"), "name %q: use lower-case letters, digits, '.', '_' and '-'", pf.Name)
	}
	if pf.Project == "" {
		return nil, l.errf(1, "missing key \"project\" (sglang or flashinfer)")
	}
	if !source.KnownProject(p.Project) {
		return nil, l.errf(l.line("", -1, "project"), "unknown project %q (sglang or flashinfer)", pf.Project)
	}
	if err := l.uncovered(p, pf.Uncovered); err != nil {
		return nil, err
	}
	if err := l.needs(p, pf.Needs); err != nil {
		return nil, err
	}
	if err := l.requirements(p, pf.Requires); err != nil {
		return nil, err
	}
	if err := l.upstream(p, pf.Upstream); err != nil {
		return nil, err
	}
	if err := l.verify(p, pf.Verify); err != nil {
		return nil, err
	}
	l.digested = append(l.digested, []byte(name), data)
	l.parsedAll = ok && dec.Digest != ""
	if err := l.variants(p, pf.Variant); err != nil {
		return nil, err
	}
	if l.parsedAll {
		// The digest of these very texts, computed ahead of time.
		p.Digest = dec.Digest
		return p, nil
	}
	digest := sha256.New()
	for i := 0; i < len(l.digested); i += 2 {
		fmt.Fprintf(digest, "%s\x00%d\x00", l.digested[i], len(l.digested[i+1]))
		digest.Write(l.digested[i+1])
	}
	p.Digest = hex.EncodeToString(digest.Sum(nil))
	return p, nil
}

func (l *loader) requirements(p *Patch, r catalogfile.Requires) error {
	for _, m := range r.GPUSMMajor {
		if m < 1 || m > 99 {
			return l.errf(l.line("requires", -1, "gpu_sm_major"), "gpu_sm_major: %d is not a GPU architecture major", m)
		}
	}
	if r.FlashInferModule != "" && !validModuleName(r.FlashInferModule) {
		return l.errf(l.line("requires", -1, "flashinfer_module"), "flashinfer_module %q is not a module name", r.FlashInferModule)
	}
	// The versions are parsed where they are checked (the gate); here
	// only to refuse a bad one early, which the built-in catalog's test
	// does for it.
	if r.CUDAMin != "" && l.full {
		if _, err := version.NewVersion(r.CUDAMin); err != nil {
			return l.errf(l.line("requires", -1, "cuda_min"), "cuda_min %q: %v", r.CUDAMin, err)
		}
	}
	dists := make([]string, 0, len(r.Packages))
	for dist := range r.Packages {
		dists = append(dists, dist)
	}
	sort.Strings(dists) // the first bad one, the same every time
	for _, dist := range dists {
		if !l.full {
			break
		}
		if _, err := source.ParseConstraints(r.Packages[dist]); err != nil {
			n := keyLine(l.data, "requires.packages", -1, dist)
			if n == 0 { // an inline table: packages = { torch = "..." }
				n = l.line("requires", -1, "packages")
			}
			return l.errf(n, "requires.packages.%s: %v", dist, err)
		}
	}
	for _, tp := range r.TP {
		if tp < 1 || tp > 1024 {
			return l.errf(l.line("requires", -1, "tp"), "requires.tp: %d is not a tensor-parallel size", tp)
		}
	}
	if r.P2P != nil && !*r.P2P {
		return l.errf(l.line("requires", -1, "p2p"), "requires.p2p = false: a patch cannot require P2P to be missing; leave it out")
	}
	p.Requires = r.Set
	p.Requires.P2PAll = r.P2PAll || (r.P2P != nil && *r.P2P)
	return nil
}

func (l *loader) upstream(p *Patch, u catalogfile.Upstream) error {
	if !upstreamStat[u.Status] {
		return l.errf(l.line("upstream", -1, "status"), "upstream status %q: one of proposed, merged, rejected, local", u.Status)
	}
	if u.MergedIn != "" {
		if _, err := source.ParseVersion(u.MergedIn); err != nil {
			return l.errf(l.line("upstream", -1, "merged_in"), "merged_in %q: %v", u.MergedIn, err)
		}
	}
	if u.MarkerFile != "" {
		if err := inProject(p.Project, u.MarkerFile); err != nil {
			return l.errf(l.line("upstream", -1, "marker_file"), "marker_file: %v", err)
		}
		if u.Marker == "" {
			return l.errf(l.line("upstream", -1, "marker_file"), "marker_file without marker")
		}
	}
	p.Upstream = Upstream{Status: u.Status, PR: u.PR, MergedIn: u.MergedIn, Marker: u.Marker, MarkerFile: u.MarkerFile}
	return nil
}

// uncovered reads the uncovered shapes: plain strings stay notes; a table
// needs name, window and why, and a marker that can be tested.
func (l *loader) uncovered(p *Patch, us []catalogfile.Uncovered) error {
	for i, u := range us {
		if u.Table == nil {
			if strings.TrimSpace(u.Text) == "" {
				return l.errf(l.line("", -1, "uncovered"), "empty entry in uncovered")
			}
			p.Uncovered = append(p.Uncovered, Uncovered{Text: u.Text})
			continue
		}
		// The entry's line is looked for only when it is wrong: finding
		// lines reads the whole file again.
		header := func() int { return l.line("uncovered", i, "") }
		e := Uncovered{}
		known := map[string]*string{"name": &e.Name, "window": &e.Window, "why": &e.Why, "file": &e.File, "contains": &e.Contains, "regex": &e.Regex}
		keys := slices.Sorted(maps.Keys(u.Table))
		for _, k := range keys {
			dst, ok := known[k]
			if !ok {
				return l.errf(l.line("uncovered", i, k), "[[uncovered]] #%d: unknown key %q (name, window, why, file, contains, regex)", i+1, k)
			}
			v, ok := u.Table[k].(string)
			if !ok {
				return l.errf(l.line("uncovered", i, k), "[[uncovered]] #%d: %s must be a string", i+1, k)
			}
			*dst = v
		}
		for _, k := range []string{"name", "window", "why"} {
			if strings.TrimSpace(*known[k]) == "" {
				return l.errf(header(), "[[uncovered]] #%d: missing key %q", i+1, k)
			}
		}
		if e.File == "" {
			return l.errf(header(), "[[uncovered]] #%d: missing key \"file\" (the marker: file plus contains or regex)", i+1)
		}
		if err := inProject(p.Project, e.File); err != nil {
			return l.errf(l.line("uncovered", i, "file"), "[[uncovered]] file: %v", err)
		}
		if (e.Contains == "") == (e.Regex == "") {
			return l.errf(header(), "[[uncovered]] #%d: needs one of contains or regex", i+1)
		}
		if e.Regex != "" && l.full {
			if _, err := regexp.Compile(e.Regex); err != nil {
				return l.errf(l.line("uncovered", i, "regex"), "[[uncovered]] regex: %v", err)
			}
		}
		p.Uncovered = append(p.Uncovered, e)
	}
	return nil
}

// needs checks the names a patch needs; they are resolved once the whole
// catalog is loaded.
func (l *loader) needs(p *Patch, ns []string) error {
	seen := map[string]bool{}
	for _, n := range ns {
		switch {
		case !validPatchName(n):
			return l.errf(l.line("", -1, "needs"), "needs: %q is not a patch name", n)
		case n == p.Name:
			return l.errf(l.line("", -1, "needs"), "needs: a patch cannot need itself")
		case seen[n]:
			return l.errf(l.line("", -1, "needs"), "needs: %q is named twice", n)
		}
		seen[n] = true
		p.Needs = append(p.Needs, n)
	}
	if len(ns) > 0 {
		// Looked for only when a name does not resolve: finding lines
		// reads the whole file again.
		p.needsLine = func() int { return l.line("", -1, "needs") }
	}
	return nil
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

func (l *loader) verify(p *Patch, vs []catalogfile.Verify) error {
	for i, v := range vs {
		if v.File == "" {
			return l.errf(l.line("verify", i, ""), "[[verify]] #%d: missing key \"file\"", i+1)
		}
		if err := inProject(p.Project, v.File); err != nil {
			return l.errf(l.line("verify", i, "file"), "[[verify]] file: %v", err)
		}
		if v.Contains == "" && v.NotContains == "" {
			return l.errf(l.line("verify", i, ""), "[[verify]] #%d: needs contains or not_contains", i+1)
		}
		p.Verify = append(p.Verify, VerifyRule{File: v.File, Contains: v.Contains, NotContains: v.NotContains})
	}
	return nil
}

func (l *loader) variants(p *Patch, vs []catalogfile.Variant) error {
	if len(vs) == 0 {
		return l.errf(1, "no [[variant]]: a patch needs at least one")
	}
	names := map[string]int{}
	for i, vf := range vs {
		v := &Variant{Name: vf.Name, Versions: strings.TrimSpace(vf.Versions), Diffs: vf.Diffs}
		if v.Name == "" {
			v.Name = v.Versions
			if v.Name == "" {
				v.Name = "any"
			}
		}
		if j, ok := names[v.Name]; ok {
			return l.errf(l.line("variant", i, "name"), "variant name %q is used twice (variants #%d and #%d)", v.Name, j+1, i+1)
		}
		names[v.Name] = i
		if v.Versions != "" && l.full {
			cs, err := source.ParseConstraints(v.Versions)
			if err != nil {
				return l.errf(l.line("variant", i, "versions"), "variant %q: versions %q: %v", v.Name, v.Versions, err)
			}
			v.Constraints = cs
		}
		for _, s := range vf.Search {
			c, err := source.CleanRel(strings.TrimSuffix(s, "/"))
			if err == nil {
				err = inProject(p.Project, c+"/")
			}
			if err != nil {
				return l.errf(l.line("variant", i, "search"), "variant %q: search: %v", v.Name, err)
			}
			v.Search = append(v.Search, c)
		}
		if len(vf.Diffs) == 0 {
			return l.errf(l.line("variant", i, ""), "variant %q: no diffs", v.Name)
		}
		for _, d := range vf.Diffs {
			c, err := source.CleanRel(d)
			if err != nil {
				return l.errf(l.line("variant", i, "diffs"), "variant %q: diff %v", v.Name, err)
			}
			data, err := l.readDiff(c)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return l.errf(l.line("variant", i, "diffs"), "variant %q: diff %s: file not found", v.Name, l.display+"/"+c)
				}
				return l.errf(l.line("variant", i, "diffs"), "variant %q: diff %s: %v", v.Name, l.display+"/"+c, err)
			}
			l.digested = append(l.digested, []byte(c), data)
			src := l.display + "/" + c
			fds, ok := l.pre.parsedDiff(c, data)
			if !ok {
				l.parsedAll = false
				if fds, err = udiff.Parse(src, data); err != nil {
					return err
				}
			}
			if len(fds) == 0 {
				return fmt.Errorf("%s: no file changes in diff", src)
			}
			for _, fd := range fds {
				// The engine writes contents and keeps each file's mode: a
				// mode change would be dropped without a word.
				if !fd.IsCreate() && !fd.IsDelete() && fd.OldMode != "" && fd.NewMode != "" && fd.OldMode != fd.NewMode {
					return fmt.Errorf("%s:%d: %s: mode changes are not supported (%s -> %s); smpatch changes file contents only", fd.Source, fd.Line, fd.Path(), fd.OldMode, fd.NewMode)
				}
				for _, fp := range []string{fd.OldPath, fd.NewPath} {
					if fp == "" {
						continue
					}
					if err := inProject(p.Project, fp); err != nil {
						return fmt.Errorf("%s:%d: %v", fd.Source, fd.Line, err)
					}
				}
			}
			v.Files = append(v.Files, fds...)
		}
		p.Variants = append(p.Variants, v)
	}
	if !l.full {
		return nil
	}
	probes := make([]variantProbes, len(p.Variants))
	for i, v := range p.Variants {
		probes[i] = probesOf(v.Versions)
	}
	for i := range p.Variants {
		for j := i + 1; j < len(p.Variants); j++ {
			a, b := p.Variants[i], p.Variants[j]
			if v, ok := overlap(a, b, probes[i], probes[j]); ok {
				return l.errf(l.line("variant", j, "versions"), "variant %q (%s) overlaps variant %q (%s): both admit %s",
					b.Name, orAny(b.Versions), a.Name, orAny(a.Versions), v)
			}
		}
	}
	return nil
}

func orAny(s string) string {
	if s == "" {
		return "any version"
	}
	return s
}

// inProject checks that a repository-relative path is clean and inside the
// project's tree.
func inProject(p source.Project, rel string) error {
	dir := strings.HasSuffix(rel, "/")
	c, err := source.CleanRel(strings.TrimSuffix(rel, "/"))
	if err != nil {
		return err
	}
	if dir {
		c += "/"
	}
	for _, r := range source.ProjectRoots(p) {
		if strings.HasPrefix(c, r) || c == r {
			return nil
		}
	}
	return fmt.Errorf("%s is outside %s's tree (%s)", rel, p, strings.Join(source.ProjectRoots(p), ", "))
}

var versionInConstraint = lazyre.New(`[0-9][0-9A-Za-z.+!_-]*`)

// overlap reports a version both variants admit, probing every version the
// constraints name and the versions just below and above each (pa and pb are
// probesOf a's and b's versions).
func overlap(a, b *Variant, pa, pb variantProbes) (string, bool) {
	if len(a.Constraints) == 0 || len(b.Constraints) == 0 {
		if a.Versions == "" && b.Versions == "" {
			return "every version", true
		}
		// An unconstrained variant overlaps every other.
		return "every version the other admits", true
	}
	for _, list := range [][]*version.Version{edgeProbes(), pa.named, pb.named, pa.near, pb.near} {
		for _, probe := range list {
			if source.Satisfies(a.Constraints, probe) && source.Satisfies(b.Constraints, probe) {
				return source.VersionString(probe), true
			}
		}
	}
	return "", false
}

// variantProbes are the versions a constraint text names and, for each in
// turn, its neighbours just below and above.
type variantProbes struct {
	named, near []*version.Version
}

// edgeProbes are a very small and a very large version.
var edgeProbes = sync.OnceValue(func() []*version.Version {
	var out []*version.Version
	for _, s := range []string{"0.0.0", "99999.0.0"} {
		if v, err := source.ParseVersion(s); err == nil {
			out = append(out, v)
		}
	}
	return out
})

// probesOf parses the versions of one variant's constraint text, once for
// all the pairs the variant is part of.
func probesOf(text string) variantProbes {
	var p variantProbes
	add := func(s string) {
		if v, err := source.ParseVersion(s); err == nil {
			p.near = append(p.near, v)
		}
	}
	for _, m := range versionInConstraint().FindAllString(text, -1) {
		m = strings.TrimRight(m, ".")
		if v, err := source.ParseVersion(m); err == nil {
			p.named = append(p.named, v)
		}
	}
	for _, v := range p.named {
		segs := v.Segments()
		add(joinSegs(segs) + ".99999")
		add(joinSegs(segs) + ".1")
		add(joinSegs(segs) + ".post1")
		add(joinSegs(segs) + "rc1")
		add(joinSegs(segs) + ".dev0")
		for k := len(segs) - 1; k >= 0; k-- {
			if segs[k] > 0 {
				below := append(append([]int(nil), segs[:k]...), segs[k]-1)
				add(joinSegs(below) + ".99999")
				break
			}
		}
		bumped := append(append([]int(nil), segs[:len(segs)-1]...), segs[len(segs)-1]+1)
		add(joinSegs(bumped))
	}
	return p
}

func joinSegs(segs []int) string {
	parts := make([]string, len(segs))
	for i, s := range segs {
		parts[i] = strconv.Itoa(s)
	}
	return strings.Join(parts, ".")
}

// undecodedLine finds the line of an undecoded key (toml.MetaData keeps
// positions to itself).
func undecodedLine(data []byte, k toml.Key) int {
	if len(k) == 0 {
		return 0
	}
	table := strings.Join(k[:len(k)-1], ".")
	if n := keyLine(data, table, -2, k[len(k)-1]); n > 0 {
		return n
	}
	// A whole unknown table: its header.
	if n := keyLine(data, k.String(), -2, ""); n > 0 {
		return n
	}
	return 0
}

var (
	tableHeaderRE = lazyre.New(`^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?`)
	keyRE         = lazyre.New(`^\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_.\- ]+?)\s*=`)
)

// keyLine finds the 1-based line of key inside table ("" for the root). idx
// selects the idx-th [[table]] (0-based); -1 means a plain table; -2 any
// occurrence. An empty key finds the table header. A key written as a
// dotted key in a parent table (requires.cuda_min = ...) is found too.
// It returns 0 when the key is not found.
func keyLine(data []byte, table string, idx int, key string) int {
	return findKeyLine(parseKeyLines(data), table, idx, key)
}

// keyLineInfo is one line of a TOML file that keyLine looks at: a table
// header (header set, name the table, idx its index among [[name]] or -1)
// or a key (full: the dotted key with its table, cur and idx the table it
// is in).
type keyLineInfo struct {
	n      int
	header bool
	name   string // header: the table
	full   string // key: table + "." + key
	cur    string // key: the table it is in
	idx    int    // the [[table]] index it is in, -1 for a plain table
}

// parseKeyLines reads every header and key line of data once.
func parseKeyLines(data []byte) []keyLineInfo {
	out := []keyLineInfo{}
	cur := ""
	count := map[string]int{}
	curIdx := -1
	inMulti := ""
	for i, ln := range strings.Split(string(data), "\n") {
		n := i + 1
		if inMulti != "" {
			if strings.Count(ln, inMulti)%2 == 1 {
				inMulti = ""
			}
			continue
		}
		trim := strings.TrimSpace(ln)
		if strings.HasPrefix(trim, "#") || trim == "" {
			continue
		}
		if strings.HasPrefix(trim, "[") {
			if m := tableHeaderRE().FindStringSubmatch(ln); m != nil {
				name := normKey(m[2])
				cur = name
				curIdx = -1
				if m[1] == "[[" {
					curIdx = count[name]
					count[name]++
				}
				out = append(out, keyLineInfo{n: n, header: true, name: name, idx: curIdx})
				continue
			}
		}
		for _, q := range []string{`"""`, `'''`} {
			if strings.Count(ln, q)%2 == 1 {
				inMulti = q
			}
		}
		m := keyRE().FindStringSubmatch(ln)
		if m == nil {
			continue
		}
		full := normKey(m[1])
		if cur != "" {
			full = cur + "." + full
		}
		out = append(out, keyLineInfo{n: n, full: full, cur: cur, idx: curIdx})
	}
	return out
}

// findKeyLine is keyLine on lines parseKeyLines read.
func findKeyLine(lines []keyLineInfo, table string, idx int, key string) int {
	want := key
	if table != "" {
		want = table + "." + key
	}
	for _, l := range lines {
		if l.header {
			if key == "" && l.name == table && (idx == -2 || idx == l.idx || (idx == -1 && l.idx == -1)) {
				return l.n
			}
			continue
		}
		if key == "" || l.full != want {
			continue
		}
		if idx == -2 || (idx == -1 && l.idx == -1) || (idx >= 0 && l.cur == table && l.idx == idx) {
			return l.n
		}
	}
	return 0
}

// normKey turns a written key (`"a" . b`) into its dotted form (a.b).
func normKey(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		p = strings.Trim(p, `"'`)
		parts[i] = p
	}
	return strings.Join(parts, ".")
}

// MaxDiffSize is the most bytes a catalog diff may have; real ones are a few
// kB. A bigger one is refused before it is read (a 300 MB diff once took
// 2 GB of memory to list).
const MaxDiffSize = 16 << 20

// readDiff is readDiff on the loader's files. Those of the built-in
// catalog, embedded in the program, are regular files: read at once (and
// any that is not read the usual way, for the usual error).
func (l *loader) readDiff(name string) ([]byte, error) {
	if l.pre != nil {
		if data, err := fs.ReadFile(l.fsys, name); err == nil && len(data) <= MaxDiffSize {
			return data, nil
		}
	}
	return readDiff(l.fsys, name)
}

// readDiff reads a catalog diff: a regular file (a named pipe would block
// forever) of at most MaxDiffSize bytes.
func readDiff(fsys fs.FS, name string) ([]byte, error) {
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		kind := "a device or socket"
		switch {
		case fi.IsDir():
			kind = "a directory"
		case fi.Mode()&fs.ModeNamedPipe != 0:
			kind = "a named pipe"
		}
		return nil, fmt.Errorf("not a regular file (%s): not read", kind)
	}
	if fi.Size() > MaxDiffSize {
		return nil, fmt.Errorf("larger than %d MiB: not read", MaxDiffSize>>20)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxDiffSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxDiffSize {
		return nil, fmt.Errorf("larger than %d MiB: not read", MaxDiffSize>>20)
	}
	return data, nil
}

package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	neturl "net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/internal/tomlfile"
	"github.com/smpatch/smpatch/patches/udiff"
	"github.com/smpatch/smpatch/source"
)

// UpstreamStatuses are the values of [upstream] status: local (never
// proposed upstream), open (a pull request is open), closed (closed
// without merging), merged; proposed and rejected are older words for
// open and closed.
var UpstreamStatuses = []string{"local", "open", "closed", "merged", "proposed", "rejected"}

// loader carries one file's context for error messages.
type loader struct {
	fsys    fs.FS
	display string // directory as errors name it
	file    string // display path of the TOML file
	data    []byte
	// lines places data's keys, read once when an error needs a line.
	lines *tomlfile.Lines
	bud   *budget // what the directory may still have read
	// digested are the texts the patch's digest covers, in order:
	// name, then text, for the TOML and each diff.
	digested [][]byte
}

// lines0 is the index of data's keys, made on first use.
func (l *loader) lines0() *tomlfile.Lines {
	if l.lines == nil {
		l.lines = tomlfile.IndexLines(l.data)
	}
	return l.lines
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
	var k toml.Key
	if table != "" {
		k = append(k, strings.Split(table, ".")...)
	}
	if idx >= 0 {
		k = append(k, strconv.Itoa(idx))
	}
	if key != "" {
		k = append(k, key)
	}
	return l.lines0().Line(k)
}

// loadPatch reads the NAME.toml called name, decodes it, refusing a key
// it has no place for, then checks it and derives the patch.
func loadPatch(fsys fs.FS, display, origin, name string, bud *budget) (*Patch, error) {
	l := &loader{fsys: fsys, display: display, file: display + "/" + name, bud: bud}
	data, err := readEntry(fsys, name, l.file, tomlfile.MaxSize)
	if err != nil {
		return nil, err
	}
	if err := bud.take(len(data), l.file); err != nil {
		return nil, err
	}
	l.data = data
	var pf patchFile
	md, err := tomlfile.Decode(l.file, data, &pf)
	if err != nil {
		return nil, err
	}
	if err := tomlfile.UnknownError(l.file, md, nil, func(k toml.Key) int { return l.lines0().Line(k) }); err != nil {
		return nil, err
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
		nameLine:  func() int { return l.line("", -1, "name") },
		orderLine: func() int { return l.line("", -1, "order") },
	}
	if u := pf.Upstream; u.Status != "" || u.PR != "" || u.Link != "" || u.MergedIn != "" || u.Marker != "" {
		p.upstreamLine = func() int { return l.line("upstream", -1, "") }
	}
	if pf.Order < 0 || pf.Order > 1_000_000 {
		return nil, l.errf(l.line("", -1, "order"), "order = %d: a place in the directory's series, 1 to 1000000", pf.Order)
	}
	p.Order = int(pf.Order)
	if p.Summary, err = l.text(l.line("", -1, "summary"), "summary", pf.Summary, false); err != nil {
		return nil, err
	}
	for i, u := range pf.Links {
		if err := l.url(l.line("", -1, "links"), fmt.Sprintf("links[%d]", i), u); err != nil {
			return nil, err
		}
	}
	if pf.Name == "" {
		return nil, l.errf(1, "missing key \"name\"")
	}
	if pf.Name != stem {
		return nil, l.errf(l.line("", -1, "name"), "name %q does not match the file name %q", pf.Name, stem+".toml")
	}
	if !ValidName(pf.Name) {
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
	if err := l.variants(p, pf.Variant); err != nil {
		return nil, err
	}
	digest := sha256.New()
	for i := 0; i < len(l.digested); i += 2 {
		fmt.Fprintf(digest, "%s\x00%d\x00", l.digested[i], len(l.digested[i+1]))
		digest.Write(l.digested[i+1])
	}
	p.Digest = hex.EncodeToString(digest.Sum(nil))
	return p, nil
}

func (l *loader) requirements(p *Patch, r requiresFile) error {
	for _, m := range r.GPUSMMajor {
		if m < 1 || m > 99 {
			return l.errf(l.line("requires", -1, "gpu_sm_major"), "gpu_sm_major: %d is not a GPU architecture major", m)
		}
	}
	if r.FlashInferModule != "" && !validModuleName(r.FlashInferModule) {
		return l.errf(l.line("requires", -1, "flashinfer_module"), "flashinfer_module %q is not a module name", r.FlashInferModule)
	}
	// The versions are parsed where they are checked (the gate); here
	// only to refuse a bad one early.
	if r.CUDAMin != "" {
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
		if !distNameRE().MatchString(dist) {
			return l.errf(l.line("requires", -1, "packages"), "requires.packages: %q is not a distribution name", dist)
		}
		if _, err := source.ParseConstraints(r.Packages[dist]); err != nil {
			n := l.line("requires.packages", -1, dist)
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

func (l *loader) upstream(p *Patch, u upstreamFile) error {
	at := func(k string) int { return l.line("upstream", -1, k) }
	if u.Status != "" && !slices.Contains(UpstreamStatuses, u.Status) {
		return l.errf(at("status"), "[upstream] status %q: one of %s", u.Status, strings.Join(UpstreamStatuses, ", "))
	}
	for _, k := range []struct{ key, v string }{{"pr", u.PR}, {"link", u.Link}} {
		if k.v != "" {
			if err := l.url(at(k.key), "[upstream] "+k.key, k.v); err != nil {
				return err
			}
		}
	}
	if u.MergedIn != "" {
		if r, _, bad := badRune(u.MergedIn, false); bad {
			return l.errf(at("merged_in"), "[upstream] merged_in: control character %U", r)
		}
		if !commitRE().MatchString(u.MergedIn) {
			if _, err := source.ParseVersion(u.MergedIn); err != nil {
				return l.errf(at("merged_in"), "[upstream] merged_in %q: neither a version nor a commit (7 to 64 lower-case hex digits): %v", u.MergedIn, err)
			}
		}
		if u.Status != "" && u.Status != "merged" {
			return l.errf(at("merged_in"), "[upstream] merged_in with status = %q: a change merged upstream has status = \"merged\"", u.Status)
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
	for _, f := range u.MarkerFiles {
		if err := inProject(p.Project, f); err != nil {
			return l.errf(l.line("upstream", -1, "marker_files"), "marker_files: %v", err)
		}
	}
	if len(u.MarkerFiles) > 0 && (u.MarkerFile == "" || u.Marker == "") {
		return l.errf(l.line("upstream", -1, "marker_files"), "marker_files without marker and marker_file")
	}
	switch u.Source {
	case "", "tree", "git", "file", "url":
	default:
		return l.errf(l.line("upstream", -1, "source"), "upstream source %q: one of tree, git, file, url", u.Source)
	}
	if u.Clone != "" && (!filepath.IsAbs(u.Clone) || strings.ContainsAny(u.Clone, "\x00\n")) {
		return l.errf(l.line("upstream", -1, "clone"), "upstream clone %q: an absolute path", u.Clone)
	}
	if u.SHA256 != "" && !isHex64(u.SHA256) {
		return l.errf(l.line("upstream", -1, "sha256"), "upstream sha256 %q: 64 hex digits", u.SHA256)
	}
	author, err := l.text(l.line("upstream", -1, "author"), "upstream author", u.Author, false)
	if err != nil {
		return err
	}
	p.Upstream = Upstream{Status: u.Status, PR: u.PR, Link: u.Link, MergedIn: u.MergedIn, Marker: u.Marker, MarkerFile: u.MarkerFile, MarkerFiles: u.MarkerFiles,
		Source: u.Source, Author: author, SHA256: u.SHA256, Clone: u.Clone}
	return nil
}

// uncovered reads the uncovered shapes: plain strings stay notes; a table
// needs name, window and why, and a marker that can be tested.
func (l *loader) uncovered(p *Patch, us []uncoveredFile) error {
	for i, u := range us {
		if u.Table == nil {
			if strings.TrimSpace(u.Text) == "" {
				return l.errf(l.line("", -1, "uncovered"), "empty entry in uncovered")
			}
			t, err := l.text(l.line("", -1, "uncovered"), fmt.Sprintf("uncovered[%d]", i), u.Text, false)
			if err != nil {
				return err
			}
			p.Uncovered = append(p.Uncovered, Uncovered{Text: t})
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
			if k == "name" || k == "window" || k == "why" {
				var err error
				if v, err = l.text(l.line("uncovered", i, k), fmt.Sprintf("[[uncovered]] #%d: %s", i+1, k), v, k == "name"); err != nil {
					return err
				}
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
		if e.Regex != "" {
			if _, err := lazyre.Compile(e.Regex); err != nil {
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
		case !ValidName(n):
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

func (l *loader) verify(p *Patch, vs []verifyFile) error {
	for i, v := range vs {
		if v.File == "" {
			return l.errf(l.line("verify", i, ""), "[[verify]] #%d: missing key \"file\"", i+1)
		}
		if err := inProject(p.Project, v.File); err != nil {
			return l.errf(l.line("verify", i, "file"), "[[verify]] file: %v", err)
		}
		if v.Contains == "" && v.NotContains == "" && v.Regex == "" && v.NotRegex == "" {
			return l.errf(l.line("verify", i, ""), "[[verify]] #%d: needs contains, not_contains, regex or not_regex", i+1)
		}
		what, err := l.text(l.line("verify", i, "what"), fmt.Sprintf("[[verify]] #%d: what", i+1), strings.TrimSpace(v.What), false)
		if err != nil {
			return err
		}
		r := VerifyRule{File: v.File, What: what, When: v.When, Contains: v.Contains, NotContains: v.NotContains, Regex: v.Regex, NotRegex: v.NotRegex}
		for _, k := range []struct {
			key, src string
			dst      **regexp.Regexp
		}{{"when", v.When, &r.when}, {"regex", v.Regex, &r.re}, {"not_regex", v.NotRegex, &r.notRe}} {
			if k.src == "" {
				continue
			}
			re, err := lazyre.Compile(k.src)
			if err != nil {
				return l.errf(l.line("verify", i, k.key), "[[verify]] #%d: %s: %v", i+1, k.key, err)
			}
			*k.dst = re
		}
		p.Verify = append(p.Verify, r)
	}
	return nil
}

func (l *loader) variants(p *Patch, vs []variantFile) error {
	if len(vs) == 0 {
		return l.errf(1, "no [[variant]]: a patch needs at least one")
	}
	if len(vs) > MaxVariants {
		return l.errf(l.line("variant", MaxVariants, ""), "%d variants, more than the %d a patch may have", len(vs), MaxVariants)
	}
	names := map[string]int{}
	for i, vf := range vs {
		if _, err := l.text(l.line("variant", i, "name"), "variant name", vf.Name, true); err != nil {
			return err
		}
		pred, err := l.text(l.line("variant", i, "predicted"), "variant predicted", vf.Predicted, false)
		if err != nil {
			return err
		}
		vf.Predicted = pred
		if len(vf.Diffs) > MaxDiffs {
			return l.errf(l.line("variant", i, "diffs"), "variant %q: %d diffs, more than the %d a variant may name", vf.Name, len(vf.Diffs), MaxDiffs)
		}
		v := &Variant{Name: vf.Name, Versions: strings.TrimSpace(vf.Versions), Diffs: vf.Diffs, Predicted: strings.TrimSpace(vf.Predicted), Base: vf.Base}
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
		if v.Versions != "" {
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
			data, err := readDiff(l.fsys, c, "diff "+l.display+"/"+c)
			if err == nil {
				err = l.bud.take(len(data), "diff "+l.display+"/"+c)
			}
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return l.errf(l.line("variant", i, "diffs"), "variant %q: diff %s: file not found", v.Name, l.display+"/"+c)
				}
				return l.errf(l.line("variant", i, "diffs"), "variant %q: %v", v.Name, err)
			}
			l.digested = append(l.digested, []byte(c), data)
			src := l.display + "/" + c
			fds, err := udiff.Parse(src, data)
			if err != nil {
				return err
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

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
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
	if r, bad := badPathRune(rel); bad {
		return fmt.Errorf("%q: control character %U in a path", rel, r)
	}
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

// MaxDiffSize is the most bytes a catalog diff may have; real ones are a few
// kB. A bigger one is refused before it is read (a 300 MB diff once took
// 2 GB of memory to list).
const MaxDiffSize = 16 << 20

// readDiff reads a catalog diff: a regular file (a named pipe would block
// forever) of at most MaxDiffSize bytes. what names it in errors.
func readDiff(fsys fs.FS, name, what string) ([]byte, error) {
	return readEntry(fsys, name, what, MaxDiffSize)
}

// url checks a URL the catalog shows: http or https, with a host, and no
// control character.
func (l *loader) url(line int, key, s string) error {
	if r, _, bad := badRune(s, false); bad {
		return l.errf(line, "%s: control character %U in a URL", key, r)
	}
	u, err := neturl.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return l.errf(line, "%s %q: not an http(s) URL", key, s)
	}
	if len(s) > MaxTextLen {
		return l.errf(line, "%s: %d bytes, more than the %d a URL may have", key, len(s), MaxTextLen)
	}
	return nil
}

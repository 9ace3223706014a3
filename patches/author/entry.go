package author

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing/fstest"

	"github.com/BurntSushi/toml"
	"github.com/google/renameio/v2"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/tomlfile"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
)

// Meta is what an entry says about where its change came from.
type Meta struct {
	Summary string
	Source  string // tree, git, file, url
	Author  string
	Link    string
	SHA256  string
	Clone   string   // the local repository the base commit is in
	Comment []string // the header comment, one line each
}

// entryVariant is one [[variant]] written.
type entryVariant struct {
	Name     string   `toml:"name"`
	Versions string   `toml:"versions,omitempty"`
	Base     string   `toml:"base,omitempty"`
	Diffs    []string `toml:"diffs"`
}

type entryUpstream struct {
	Status string `toml:"status"`
	Source string `toml:"source,omitempty"`
	Author string `toml:"author,omitempty"`
	Link   string `toml:"link,omitempty"`
	SHA256 string `toml:"sha256,omitempty"`
	Clone  string `toml:"clone,omitempty"`
}

type entryFile struct {
	Name     string         `toml:"name"`
	Project  string         `toml:"project"`
	Summary  string         `toml:"summary"`
	Links    []string       `toml:"links,omitempty"`
	Upstream entryUpstream  `toml:"upstream"`
	Variant  []entryVariant `toml:"variant"`
}

// Entry is a catalog entry to write: NAME.toml and its diffs (paths
// relative to the catalog directory).
type Entry struct {
	Dir   string
	Name  string
	TOML  []byte
	Diffs map[string][]byte
}

// variantName is the variant label of a tree version ("v0.5.14"), or
// "base" when the version is unknown.
func variantName(ver string) string {
	if ver == "" {
		return "base"
	}
	return "v" + ver
}

var safeLabel = regexp.MustCompile(`[^A-Za-z0-9._+-]`)

// diffName is the diff file of variant v of patch name.
func diffName(name, v string) string {
	return name + "/" + safeLabel.ReplaceAllString(v, "_") + ".diff"
}

// newEntry is the entry of a new patch with one variant.
func newEntry(dir, name string, p source.Project, vr *verRange, base string, diff []byte, m Meta) (*Entry, error) {
	v := entryVariant{Name: vr.Name, Versions: vr.Range, Base: base}
	if vr.Comment != "" {
		m.Comment = append(m.Comment, vr.Comment+".")
	}
	v.Diffs = []string{diffName(name, v.Name)}
	f := entryFile{Name: name, Project: string(p), Summary: m.Summary,
		Upstream: entryUpstream{Status: "local", Source: m.Source, Author: m.Author, Link: m.Link, SHA256: m.SHA256, Clone: m.Clone},
		Variant:  []entryVariant{v}}
	if m.Link != "" {
		f.Links = []string{m.Link}
	}
	var b bytes.Buffer
	for _, c := range m.Comment {
		b.WriteString(strings.TrimRight("# "+strings.ReplaceAll(c, "\n", " "), " ") + "\n")
	}
	if len(m.Comment) > 0 {
		b.WriteString("\n")
	}
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return &Entry{Dir: dir, Name: name, TOML: b.Bytes(), Diffs: map[string][]byte{v.Diffs[0]: diff}}, nil
}

// Load checks the entry as the catalog loader would (every key, every
// diff), from memory, and returns the patch; nothing is read from disk but
// the entry's other diffs that it names and does not carry.
func (e *Entry) Load() (*catalog.Patch, error) {
	m := fstest.MapFS{e.Name + ".toml": {Data: e.TOML}}
	for k, v := range e.Diffs {
		m[k] = &fstest.MapFile{Data: v}
	}
	ps, err := catalog.LoadFS(readThrough{m, e.Dir}, strings.TrimSuffix(e.Dir, "/"), e.Dir)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.Name == e.Name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%s: no patch %s", e.Dir, e.Name)
}

// readThrough serves a map's files, and other files from the directory.
type readThrough struct {
	m   fstest.MapFS
	dir string
}

func (r readThrough) Open(name string) (fs.File, error) {
	if _, ok := r.m[name]; ok {
		return r.m.Open(name)
	}
	if strings.HasSuffix(name, ".toml") || name == "." {
		return r.m.Open(name)
	}
	return os.DirFS(r.dir).Open(name)
}

// Write writes the entry's files into its directory, inside it (os.Root:
// no symlink leads out), each atomically, diffs first. With fresh, an
// existing NAME.toml is refused. It returns the files it wrote, to undo.
func (e *Entry) Write(fresh bool) ([]string, error) {
	if err := os.MkdirAll(e.Dir, 0o755); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(e.Dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if fresh {
		if _, err := r.Lstat(e.Name + ".toml"); err == nil {
			return nil, inputf("%s: already exists: `smpatch refresh %s` adds a variant to it, or choose another name", path.Join(e.Dir, e.Name+".toml"), e.Name)
		}
	}
	var wrote []string
	put := func(rel string, data []byte) error {
		if err := r.MkdirAll(path.Dir(rel), 0o755); err != nil {
			return err
		}
		if fi, err := r.Lstat(rel); err == nil && !fi.Mode().IsRegular() {
			return inputf("%s: not a regular file (%s): not written", path.Join(e.Dir, rel), bounded.Kind(fi.Mode()))
		}
		d, err := r.OpenRoot(path.Dir(rel))
		if err != nil {
			return err
		}
		defer d.Close()
		if err := renameio.WriteFile(path.Base(rel), data, 0o644, renameio.WithRoot(d)); err != nil {
			return fmt.Errorf("writing %s: %w", path.Join(e.Dir, rel), err)
		}
		wrote = append(wrote, rel)
		return nil
	}
	for rel, data := range e.Diffs {
		if err := put(rel, data); err != nil {
			e.remove(wrote)
			return nil, err
		}
	}
	if err := put(e.Name+".toml", e.TOML); err != nil {
		e.remove(wrote)
		return nil, err
	}
	return wrote, nil
}

// remove deletes files Write wrote (undoing a new entry).
func (e *Entry) remove(rels []string) {
	r, err := os.OpenRoot(e.Dir)
	if err != nil {
		return
	}
	defer r.Close()
	for _, rel := range rels {
		_ = r.Remove(rel)
	}
	_ = r.Remove(e.Name) // the diff directory, when empty
}

// readEntry reads NAME.toml of dir (bounded, regular).
func readEntry(dir, name string) ([]byte, error) {
	data, err := tomlfile.ReadFile(os.DirFS(dir), name+".toml")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, inputf("%s: no such entry (smpatch new or import writes one)", path.Join(dir, name+".toml"))
	}
	return data, err
}

// addVariant returns data (a NAME.toml) with variant v inserted before its
// first [[variant]] (variants are newest first), and the versions of
// variant narrow (its index; -1: none) set to narrowTo.
func addVariant(data []byte, v entryVariant, narrow int, narrowTo string) ([]byte, error) {
	lines := strings.SplitAfter(string(data), "\n")
	if narrow >= 0 {
		li := tomlfile.IndexLines(data)
		n := li.Line(toml.Key{"variant", strconv.Itoa(narrow), "versions"})
		repl := "versions = " + strconv.Quote(narrowTo) + "\n"
		if n > 0 {
			lines[n-1] = repl
		} else {
			h := li.Line(toml.Key{"variant", strconv.Itoa(narrow)})
			if h <= 0 {
				return nil, fmt.Errorf("variant #%d: its header line is not found", narrow+1)
			}
			lines = append(lines[:h], append([]string{repl}, lines[h:]...)...)
		}
	}
	first := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "[[variant]]" {
			first = i
			break
		}
	}
	var b bytes.Buffer
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(struct {
		Variant []entryVariant `toml:"variant"`
	}{[]entryVariant{v}}); err != nil {
		return nil, err
	}
	block := b.String() + "\n"
	if first < 0 {
		return []byte(strings.Join(lines, "") + "\n" + block), nil
	}
	return []byte(strings.Join(lines[:first], "") + block + strings.Join(lines[first:], "")), nil
}

package patches

import (
	"github.com/smpatch/smpatch/patches/udiff"

	"io/fs"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/smpatch/smpatch/internal/tomlfile"
	"github.com/smpatch/smpatch/patches/internal/catalogfile"
)

const regenerate = "run `go generate ./patches` (or `make generate`)"

// builtin_decoded.go holds what the embedded NAME.toml files decode to
// now, and nothing else; a catalog edit without regenerating fails here.
func TestBuiltinDecodedCurrent(t *testing.T) {
	fsys := builtinCatalog()
	names, err := fs.Glob(fsys, "*.toml")
	if err != nil {
		t.Fatal(err)
	}
	pre := builtinPrebuilt()
	var have []string
	for n := range pre.files {
		have = append(have, n)
	}
	sort.Strings(names)
	sort.Strings(have)
	if !slices.Equal(names, have) {
		t.Fatalf("patches/builtin_decoded.go holds %v, patches/catalog has %v: %s", have, names, regenerate)
	}
	for _, n := range names {
		data, err := tomlfile.ReadFile(fsys, n)
		if err != nil {
			t.Fatal(err)
		}
		file := builtinDisplay + "/" + n
		pf, err := catalogfile.Decode(file, data, func(k toml.Key) int { return undecodedLine(data, k) })
		if err != nil {
			t.Fatal(err)
		}
		if pre.files[n].Text != string(data) {
			t.Errorf("patches/builtin_decoded.go was generated from another text of %s: %s", file, regenerate)
		}
		if !reflect.DeepEqual(pre.files[n].Patch, pf) {
			t.Errorf("patches/builtin_decoded.go differs from what %s decodes to: %s", file, regenerate)
		}
		if _, ok := predecoded(pre, n, data); !ok {
			t.Errorf("%s: LoadCatalog would decode it again", file)
		}
	}
}

// Every built-in patch loads the same from its TOML and from the value
// decoded ahead of time.
func TestBuiltinDecodedLoadsTheSame(t *testing.T) {
	fromTOML, err := loadCatalogFrom(builtinCatalog(), nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := LoadCatalog(nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := fromTOML.All(), fast.All()
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("%d patches from the TOML, %d decoded ahead of time", len(a), len(b))
	}
	for i := range a {
		if x, y := observable(a[i]), observable(b[i]); !reflect.DeepEqual(x, y) {
			t.Errorf("%s loads differently from its TOML:\n%+v\n%+v", a[i].Name, x, y)
		}
	}
	if fromTOML.Digest() != fast.Digest() {
		t.Error("catalog digests differ")
	}
}

// loadedPatch is what a loaded Patch shows: its fields, with what
// reflect.DeepEqual cannot compare (functions) replaced by what they give.
type loadedPatch struct {
	Patch       Patch
	Constraints []string
	NeedsLine   int
	Needed      []string
}

func observable(p *Patch) loadedPatch {
	o := loadedPatch{Patch: *p}
	if p.needsLine != nil {
		o.NeedsLine = p.needsLine()
	}
	o.Patch.needsLine = nil
	for _, q := range p.needed {
		o.Needed = append(o.Needed, q.Name)
	}
	o.Patch.needed = nil
	o.Patch.Variants = nil
	for _, v := range p.Variants {
		c := *v
		o.Constraints = append(o.Constraints, v.Constraints.String())
		c.Constraints = nil
		o.Patch.Variants = append(o.Patch.Variants, &c)
	}
	return o
}

// A value decoded ahead of time is used only for the text it came from;
// it gets every check a decoded file gets, with the file's lines.
func TestPredecodedOnlyForItsText(t *testing.T) {
	fsys := catFS(map[string]string{"demo.toml": testTOML, "demo/a.diff": testDiff})
	pf, err := catalogfile.Decode("demo.toml", []byte(testTOML), nil)
	if err != nil {
		t.Fatal(err)
	}
	pf.Summary = "from the value"
	ps, err := loadCatalogFS(fsys, "cat", "test", true, &prebuilt{files: map[string]catalogfile.Decoded{"demo.toml": {Text: testTOML, Patch: pf}}})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Summary != "from the value" {
		t.Fatalf("summary %q: the value decoded ahead of time was not used", ps[0].Summary)
	}

	ps, err = loadCatalogFS(fsys, "cat", "test", true, &prebuilt{files: map[string]catalogfile.Decoded{"demo.toml": {Text: testTOML + "\n", Patch: pf}}})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Summary != "demo" {
		t.Fatalf("summary %q: a value decoded from another text was used", ps[0].Summary)
	}

	pf.Project = "pytorch"
	_, err = loadCatalogFS(fsys, "cat", "test", true, &prebuilt{files: map[string]catalogfile.Decoded{"demo.toml": {Text: testTOML, Patch: pf}}})
	if err == nil || err.Error() != `cat/demo.toml:2: unknown project "pytorch" (sglang or flashinfer)` {
		t.Fatalf("got %v, want the unknown project at its line", err)
	}
}

// A diff parsed ahead of time, and the digest computed ahead of time, are
// used only while every text is the one they came from: a diff edited
// since is parsed, and the digest computed, from what is there now.
func TestPrebuiltDiffOnlyForItsText(t *testing.T) {
	fsys := catFS(map[string]string{"demo.toml": testTOML, "demo/a.diff": testDiff})
	pf, err := catalogfile.Decode("demo.toml", []byte(testTOML), nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := loadCatalogFS(fsys, "cat", "test", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	marker := []*FileDiff{{OldPath: "python/sglang/x.py", NewPath: "python/sglang/x.py", Source: "from the value", Line: 1}}
	pre := func(diffText string) *prebuilt {
		return &prebuilt{
			files: map[string]catalogfile.Decoded{"demo.toml": {Text: testTOML, Patch: pf, Digest: "digest from the value"}},
			diffs: map[string]prebuiltDiff{"demo/a.diff": {Text: diffText, Files: [][]*FileDiff{marker}}},
		}
	}

	ps, err := loadCatalogFS(fsys, "cat", "test", true, pre(testDiff))
	if err != nil {
		t.Fatal(err)
	}
	if v := ps[0].Variants[0]; len(v.Files) != 1 || v.Files[0].Source != "from the value" || ps[0].Digest != "digest from the value" {
		t.Fatalf("files %+v, digest %q: the values derived ahead of time were not used", v.Files, ps[0].Digest)
	}

	ps, err = loadCatalogFS(fsys, "cat", "test", true, pre(testDiff+" "))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ps[0].Variants[0].Files, want[0].Variants[0].Files) || ps[0].Digest != want[0].Digest {
		t.Fatalf("a diff parsed from another text was used (files %+v, digest %q)", ps[0].Variants[0].Files, ps[0].Digest)
	}
}

// builtin_decoded.go's diffs are what ParseDiff reads from the embedded
// diffs now, and its digests what loading the texts gives.
func TestBuiltinDiffsCurrent(t *testing.T) {
	fsys := builtinCatalog()
	ps, err := loadCatalogFS(fsys, builtinDisplay, BuiltinOrigin, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	pre := builtinPrebuilt()
	n := 0
	for _, p := range ps {
		if d := pre.files[strings.TrimPrefix(p.File, builtinDisplay+"/")]; d.Digest != p.Digest {
			t.Errorf("%s: digest %q in patches/builtin_decoded.go, %q now: %s", p.File, d.Digest, p.Digest, regenerate)
		}
		for _, v := range p.Variants {
			for _, d := range v.Diffs {
				n++
				data, err := fs.ReadFile(fsys, d)
				if err != nil {
					t.Fatal(err)
				}
				fds, err := udiff.Parse(builtinDisplay+"/"+d, data)
				if err != nil {
					t.Fatal(err)
				}
				got, ok := pre.parsedDiff(d, data)
				if !ok || !reflect.DeepEqual(got, fds) {
					t.Errorf("patches/builtin_decoded.go has not what %s parses to now: %s", d, regenerate)
				}
			}
		}
	}
	uses := map[string]int{}
	for _, p := range ps {
		for _, v := range p.Variants {
			for _, d := range v.Diffs {
				uses[d]++
			}
		}
	}
	for d, x := range builtinDiffs() {
		if len(x.Files) != uses[d] {
			t.Errorf("patches/builtin_decoded.go has %d copies of %s, the catalog names it %d times: %s", len(x.Files), d, uses[d], regenerate)
		}
	}
	if n == 0 {
		t.Error("no diffs in the built-in catalog")
	}
}

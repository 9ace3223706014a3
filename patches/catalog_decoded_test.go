package patches

import (
	"crypto/sha256"
	"encoding/hex"
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
	pre := builtinDecoded()
	var have []string
	for n := range pre {
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
		sum := sha256.Sum256(data)
		if got := pre[n].SHA256; got != hex.EncodeToString(sum[:]) {
			t.Errorf("patches/builtin_decoded.go was generated from another text of %s: %s", file, regenerate)
		}
		if !reflect.DeepEqual(pre[n].Patch, pf) {
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
	sum := sha256.Sum256([]byte(testTOML))
	mine := hex.EncodeToString(sum[:])

	pf.Summary = "from the value"
	ps, err := loadCatalogFS(fsys, "cat", "test", true, map[string]catalogfile.Decoded{"demo.toml": {SHA256: mine, Patch: pf}})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Summary != "from the value" {
		t.Fatalf("summary %q: the value decoded ahead of time was not used", ps[0].Summary)
	}

	ps, err = loadCatalogFS(fsys, "cat", "test", true, map[string]catalogfile.Decoded{"demo.toml": {SHA256: strings.Repeat("0", 64), Patch: pf}})
	if err != nil {
		t.Fatal(err)
	}
	if ps[0].Summary != "demo" {
		t.Fatalf("summary %q: a value decoded from another text was used", ps[0].Summary)
	}

	pf.Project = "pytorch"
	_, err = loadCatalogFS(fsys, "cat", "test", true, map[string]catalogfile.Decoded{"demo.toml": {SHA256: mine, Patch: pf}})
	if err == nil || err.Error() != `cat/demo.toml:2: unknown project "pytorch" (sglang or flashinfer)` {
		t.Fatalf("got %v, want the unknown project at its line", err)
	}
}

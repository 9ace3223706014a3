package doctor

import (
	"fmt"
	"path"
	"strings"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/source"
)

// pinRe is one exact pin of a requirement: name[extras]==version.
var pinRe = lazyre.New(`^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*==\s*([A-Za-z0-9.+!_-]+)`)

// pins records pin.NAME for every exact pin of the tree's dependencies:
// python/pyproject.toml of a checkout, the dist-info Requires-Dist of an
// installed package (requires, when the caller read them).
func (tr *treeReader) pins(f *Facts, requires []string) {
	if requires == nil && tr.t.Kind() == source.KindSitePackages {
		if d, err := source.FindDist([]string{tr.t.Root()}, "sglang"); err == nil && d != nil {
			requires = d.Metadata["Requires-Dist"]
			if requires == nil {
				requires = []string{}
			}
		}
	}
	if requires != nil {
		for _, r := range requires {
			if m := pinRe().FindStringSubmatch(r); m != nil {
				name := "pin." + source.NormalizeDistName(m[1])
				if _, ok := f.known[name]; !ok {
					f.set(name, "dist-info Requires-Dist "+strings.TrimSpace(r), m[3])
				}
			}
		}
		f.unknownBecause("pin", "not pinned by the installed sglang's Requires-Dist")
		for _, name := range []string{"flashinfer-python", "sgl-kernel", "sglang-kernel", "sgl-deep-gemm", "torch"} {
			if _, ok := f.known["pin."+name]; !ok {
				f.none("pin."+name, "the installed sglang's Requires-Dist pins no "+name)
			}
		}
		return
	}
	const file = pyprojectFile
	data, err := tr.t.ReadFile(file)
	if err != nil {
		f.unknownBecause("pin", file+": "+err.Error())
		return
	}
	for i, line := range strings.Split(string(data), "\n") {
		for _, q := range quotedStrings(line) {
			if m := pinRe().FindStringSubmatch(q); m != nil {
				name := "pin." + source.NormalizeDistName(m[1])
				if _, ok := f.known[name]; !ok {
					f.set(name, fmt.Sprintf("%s:%d: %s", file, i+1, strings.TrimSpace(line)), m[3])
				}
			}
		}
	}
	for _, name := range []string{"flashinfer-python", "sgl-kernel", "sglang-kernel", "sgl-deep-gemm", "torch"} {
		if _, ok := f.known["pin."+name]; !ok {
			f.none("pin."+name, file+" pins no "+name)
		}
	}
	f.unknownBecause("pin", file+" pins no such package")
}

// pyprojectFile is where a checkout pins its dependencies.
const pyprojectFile = "python/pyproject.toml"

// quotedStrings are the "..." strings of one TOML line.
func quotedStrings(line string) []string {
	var out []string
	for {
		i := strings.IndexByte(line, '"')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(line[i+1:], '"')
		if j < 0 {
			return out
		}
		out = append(out, line[i+1:i+1+j])
		line = line[i+j+2:]
	}
}

const modelsDir = "python/sglang/srt/models"

// entryRe finds a models module's EntryClass assignment.
var entryRe = lazyre.New(`^EntryClass\s*=\s*`)

// modelClasses are the architecture names the tree's model registry
// knows: every EntryClass of python/sglang/srt/models/*.py (one class or
// a list). nil when the tree lists no models directory.
func (tr *treeReader) modelClasses() (map[string]bool, error) {
	files, err := tr.t.ListFiles(modelsDir)
	if err != nil || len(files) == 0 {
		return nil, nil
	}
	known := map[string]bool{}
	for _, rel := range files {
		if path.Dir(rel) != modelsDir || !strings.HasSuffix(rel, ".py") {
			continue
		}
		data, err := tr.t.ReadFile(rel)
		if err != nil {
			continue
		}
		// EntryClass is a top-level assignment: read the logical lines from
		// the first line that starts with it.
		src := string(data)
		at := strings.Index(src, "\nEntryClass")
		switch {
		case strings.HasPrefix(src, "EntryClass"):
			at = 0
		case at < 0:
			continue
		default:
			at++
		}
		for _, l := range pyLines(src[at:]) {
			if l.Indent != 0 || !entryRe().MatchString(l.Text) {
				continue
			}
			expr := strings.TrimSpace(l.Text[entryRe().FindStringIndex(l.Text)[1]:])
			if (strings.HasPrefix(expr, "[") || strings.HasPrefix(expr, "(")) && closeOf(expr, 0) == len(expr)-1 {
				expr = expr[1 : len(expr)-1]
			}
			for _, name := range splitTop(expr, ',') {
				if isIdentString(name) {
					known[name] = true
				}
			}
		}
	}
	if len(known) == 0 {
		return nil, nil
	}
	return known, nil
}

func isIdentString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isIdent(s[i]) {
			return false
		}
	}
	return s != "" && (s[0] < '0' || s[0] > '9')
}

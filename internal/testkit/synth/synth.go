package synth

//go:generate sh -c "rm -f shapes/*.txtar && cp ../../../testdata/shapes/*.txtar shapes/"

import (
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/rogpeppe/go-internal/txtar"
)

//go:embed shapes/*.txtar
var shapesFS embed.FS

// Marker is the comment line where fullSize trees receive filler code.
const Marker = "# smpatch-synth: filler"

// FullSizes is the approximate size in bytes of each target file in the
// upstream revisions the shapes stand for; fullSize trees are padded to it.
var FullSizes = map[string]int{
	"python/sglang/srt/layers/communicator.py":                     140_000,
	"python/sglang/srt/server_args.py":                             250_000,
	"python/sglang/srt/arg_groups/overrides.py":                    86_000,
	"python/sglang/srt/layers/flashinfer_comm_fusion.py":           50_000,
	"python/sglang/srt/layers/layer_boundary/residual/add_norm.py": 15_000,
}

// Shapes returns the names of the available shapes, sorted.
func Shapes() []string {
	entries, err := shapesFS.ReadDir("shapes")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".txtar"); ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// Comment returns the leading comment of a shape's fixture: which upstream
// shape and era it stands for. It is empty for an unknown shape.
func Comment(shape string) string {
	a, err := archive(shape)
	if err != nil {
		return ""
	}
	return string(a.Comment)
}

// SGLangTree returns the files of a shape, repository-relative path to
// bytes, or nil for an unknown shape. With fullSize, every file listed in
// FullSizes that carries filler markers is padded to about that size; the
// lines of the small tree stay in the same order with the same bytes.
func SGLangTree(shape string, fullSize bool) map[string][]byte {
	a, err := archive(shape)
	if err != nil {
		return nil
	}
	files := make(map[string][]byte, len(a.Files))
	for _, f := range a.Files {
		data := f.Data
		if target, ok := FullSizes[f.Name]; ok && fullSize {
			data = pad(f.Name, data, target)
		}
		files[f.Name] = append([]byte(nil), data...)
	}
	return files
}

func archive(shape string) (*txtar.Archive, error) {
	if shape == "" || strings.ContainsAny(shape, `/\`) {
		return nil, fmt.Errorf("bad shape name %q", shape)
	}
	data, err := shapesFS.ReadFile(path.Join("shapes", shape+".txtar"))
	if err != nil {
		return nil, err
	}
	return txtar.Parse(data), nil
}

// pad inserts generated functions after each marker line so that the file
// reaches about target bytes, the budget shared evenly among the markers.
func pad(name string, data []byte, target int) []byte {
	lines := strings.SplitAfter(string(data), "\n")
	var markers []int
	for i, l := range lines {
		if strings.TrimSpace(l) == Marker {
			markers = append(markers, i)
		}
	}
	missing := target - len(data)
	if len(markers) == 0 || missing <= 0 {
		return data
	}
	share := missing / len(markers)
	var b strings.Builder
	b.Grow(target + 1024)
	m := 0
	for i, l := range lines {
		b.WriteString(l)
		if m < len(markers) && markers[m] == i {
			indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
			writeFiller(&b, name, m, indent, share)
			m++
		}
	}
	return []byte(b.String())
}

// writeFiller writes blank-line separated functions at the given indent
// until about size bytes are written. The functions take *args so they are
// valid both at module level and as methods, and they mention nothing a
// patch could anchor on.
func writeFiller(b *strings.Builder, file string, marker int, indent string, size int) {
	tag := strings.NewReplacer("/", "_", ".", "_").Replace(path.Base(file))
	start := b.Len()
	for n := 0; b.Len()-start < size; n++ {
		fmt.Fprintf(b, "\n\n%sdef _synthetic_%s_%d_%04d(*args, **kwargs):\n", indent, tag, marker, n)
		fmt.Fprintf(b, "%s    \"\"\"Synthetic filler: keeps this file near upstream's size.\"\"\"\n", indent)
		fmt.Fprintf(b, "%s    total = %d\n", indent, n)
		fmt.Fprintf(b, "%s    for value in args:\n", indent)
		fmt.Fprintf(b, "%s        total += len(repr(value)) %% %d\n", indent, 7+n%11)
		fmt.Fprintf(b, "%s    if kwargs.get(\"scale\"):\n", indent)
		fmt.Fprintf(b, "%s        total *= int(kwargs[\"scale\"])\n", indent)
		fmt.Fprintf(b, "%s    return total\n", indent)
	}
	b.WriteString("\n")
}

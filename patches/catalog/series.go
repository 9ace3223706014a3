package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// SeriesFile is the name of the file that orders a catalog directory's
// patches, quilt's way: one patch name a line, "#" to the end of a line a
// comment, blank lines ignored.
const SeriesFile = "series"

// SeriesEntry is one name of a series file and its line.
type SeriesEntry struct {
	Name string
	Line int
}

// ParseSeries reads a series file's text; file names it in errors
// ("file:line: ..."). Each line holds at most one patch name, after which
// "#" starts a comment; a name given twice, one that is not a patch name,
// a control character and more than MaxPatches names are refused.
func ParseSeries(file string, data []byte) ([]SeriesEntry, error) {
	if len(data) > MaxSeriesSize {
		return nil, fmt.Errorf("%s: larger than %d KiB: not read", file, MaxSeriesSize>>10)
	}
	var out []SeriesEntry
	first := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		if r, at, bad := badRune(line, true); bad && line[at] != '\t' {
			return nil, fmt.Errorf("%s:%d: control character %U: not allowed in a series", file, n, r)
		}
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
			continue
		case len(fields) > 1:
			return nil, fmt.Errorf("%s:%d: one patch name a line, not %q (quilt's options such as -p1 have no meaning here: every catalog diff is -p1)", file, n, strings.Join(fields, " "))
		case !ValidName(fields[0]):
			return nil, fmt.Errorf("%s:%d: %q is not a patch name (lower-case letters, digits, '.', '_' and '-')", file, n, fields[0])
		}
		name := fields[0]
		if at, dup := first[name]; dup {
			return nil, fmt.Errorf("%s:%d: %s is already in the series (line %d)", file, n, name, at)
		}
		if len(out) == MaxPatches {
			return nil, fmt.Errorf("%s:%d: more than %d patches in a series", file, n, MaxPatches)
		}
		first[name] = n
		out = append(out, SeriesEntry{Name: name, Line: n})
	}
	return out, nil
}

// Series is the order a catalog directory gives its patches: its series
// file, or the patches' `order` keys.
type Series struct {
	// Dir is the directory as errors name it; File is its series file,
	// "" when the order keys give the order.
	Dir, File string
	Patches   []*Patch
}

// dirSeries reads the series of one catalog directory whose patches are
// ps: its series file, else the order keys of its patches; nil when it
// has neither. A name the directory does not hold, and a series file
// beside order keys, are errors with the file and line.
func dirSeries(fsys fs.FS, display string, ps []*Patch, bud *budget) (*Series, error) {
	byName := map[string]*Patch{}
	var ordered []*Patch
	for _, p := range ps {
		byName[p.Name] = p
		if p.Order > 0 {
			ordered = append(ordered, p)
		}
	}
	file := display + "/" + SeriesFile
	data, err := readEntry(fsys, SeriesFile, file, MaxSeriesSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if len(ordered) == 0 {
			return nil, nil
		}
		sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Order < ordered[j].Order })
		for i := 1; i < len(ordered); i++ {
			if a, b := ordered[i-1], ordered[i]; a.Order == b.Order {
				return nil, fmt.Errorf("%s: order = %d is also %s's (%s): give each patch its own place", b.orderAt(), b.Order, a.Name, a.orderAt())
			}
		}
		return &Series{Dir: display, Patches: ordered}, nil
	case err != nil:
		return nil, err
	}
	if err := bud.take(len(data), file); err != nil {
		return nil, err
	}
	if len(ordered) > 0 {
		p := ordered[0]
		return nil, fmt.Errorf("%s: order = %d, but %s orders this directory: list %s there instead", p.orderAt(), p.Order, file, p.Name)
	}
	es, err := ParseSeries(file, data)
	if err != nil {
		return nil, err
	}
	s := &Series{Dir: display, File: file}
	for _, e := range es {
		p, ok := byName[e.Name]
		if !ok {
			names := make([]string, 0, len(ps))
			for _, q := range ps {
				names = append(names, q.Name)
			}
			have := "it has none"
			if len(names) > 0 {
				have = "it has " + strings.Join(names, ", ")
			}
			return nil, fmt.Errorf("%s:%d: %s is not a patch of %s (%s); a series orders its own directory's patches, and a patch of another catalog goes in `needs` of the patch that needs it", file, e.Line, e.Name, display, have)
		}
		s.Patches = append(s.Patches, p)
	}
	if len(s.Patches) == 0 {
		return nil, fmt.Errorf("%s: names no patch", file)
	}
	return s, nil
}

// orderAt is where the patch's order key is.
func (p *Patch) orderAt() string {
	if p.orderLine != nil {
		if n := p.orderLine(); n > 0 {
			return fmt.Sprintf("%s:%d", p.File, n)
		}
	}
	return p.File
}

// Series are the series of the catalog's directories, in the order the
// directories were given; directories without one are left out.
func (c *Catalog) Series() []Series {
	out := make([]Series, len(c.series))
	for i, s := range c.series {
		out[i] = *s
		out[i].Patches = append([]*Patch(nil), s.Patches...)
	}
	return out
}

// SeriesSet is the set `apply` with no names applies: every directory's
// series in the order the directories were given, each patch once, after
// the patches they need that no series names (built-in ones, say). Needed lists those added. It is an
// error when no directory has a series (the error lists the patches that
// could be named) and when the series are of different projects.
func (c *Catalog) SeriesSet() (set []*Patch, needed []*Patch, err error) {
	if len(c.series) == 0 {
		names := make([]string, 0, len(c.all))
		for _, p := range c.all {
			names = append(names, p.Name)
		}
		if len(names) == 0 {
			return nil, nil, errors.New("no patch named, and the catalog is empty")
		}
		return nil, nil, fmt.Errorf("no patch named, and no catalog directory orders its patches (a series file or order keys: docs/engine.md); name one or more of: %s (run 'smpatch apply --help')", strings.Join(names, ", "))
	}
	in := map[*Patch]bool{}
	var listed []*Patch
	for _, s := range c.series {
		for _, p := range s.Patches {
			if len(listed) > 0 && p.Project != listed[0].Project {
				return nil, nil, fmt.Errorf("the series of %s orders %s patches and %s a %s patch (%s): apply them separately, by name", c.series[0].Dir, listed[0].Project, s.Dir, p.Project, p.Name)
			}
			if !in[p] {
				in[p] = true
				listed = append(listed, p)
			}
		}
	}
	// What the series need from elsewhere goes first, under the whole
	// series: reverting the series newest first then leaves it in place.
	for _, p := range listed {
		for _, q := range p.Needed() {
			if !in[q] {
				in[q] = true
				needed = append(needed, q)
			}
		}
	}
	set = append(append(set, needed...), listed...)
	return NeedsFirst(set), needed, nil
}

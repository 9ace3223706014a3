package matrix

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/internal/shell"
	"github.com/smpatch/smpatch/internal/smver"
	"github.com/smpatch/smpatch/internal/tomlfile"
)

type fileMatrix struct {
	Name     string                               `toml:"name"`
	Project  string                               `toml:"project"`
	MaxCells *int64                               `toml:"max_cells"`
	ArchAxis string                               `toml:"arch_axis"`
	Rules    []string                             `toml:"rules"`
	Base     Base                                 `toml:"base"`
	Axes     map[string]any                       `toml:"axes"`
	Presets  map[string]map[string]map[string]any `toml:"presets"`
	Zip      [][]string                           `toml:"zip"`
	Exclude  []map[string]any                     `toml:"exclude"`
	Include  []map[string]any                     `toml:"include"`
	IDPrefix map[string]string                    `toml:"id_prefix"`
	Launch   fileLaunch                           `toml:"launch"`
	Requires map[string]fileRequires              `toml:"requires"`
}

// fileRequires is [requires.PATCH]: what a cell with that patch needs.
var (
	envKeyRe  = lazyre.New(`^[A-Z_][A-Z0-9_]*$`)
	flagKeyRe = lazyre.New(`^--[a-z0-9][a-z0-9-]*$`)
	nameRe    = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
	presetRe  = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
)

// Load reads and validates a matrix file and the rules files it names.
// Every error names the file and, where it can, the line.
func Load(path string) (*Matrix, error) {
	if hasControl(path) {
		return nil, fmt.Errorf("%q: a matrix file name with a control character is refused (it would reach scripts and logs)", path)
	}
	data, err := tomlfile.ReadFile(nil, path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse is Load on bytes already read; file names the source in messages and
// anchors relative rules paths.
func Parse(file string, data []byte) (*Matrix, error) {
	var fm fileMatrix
	md, err := tomlfile.Decode(file, data, &fm)
	if err != nil {
		return nil, err
	}
	m := &Matrix{
		File:     file,
		Name:     fm.Name,
		Project:  fm.Project,
		Base:     fm.Base,
		Presets:  map[string]map[string]*Preset{},
		IDPrefix: map[string]string{},
		lines:    tomlfile.IndexLines(data),
		src:      strings.Split(string(data), "\n"),
		axis:     map[string]int{},
	}
	if k := caseMismatch(md, reflect.TypeOf(fm)); k != nil {
		return nil, m.errf(m.lines.Line(k), "unknown key %q (keys are lower case)", k.String())
	}
	if hasControl(m.Name) {
		return nil, m.errf(m.line("name"), "name %q: control characters (newline, tab, escape) are not allowed", shortText(m.Name))
	}
	if len(m.Name) > MaxNameBytes {
		// It goes into every cell's run.sh, its Job and the results: a
		// name of a megabyte once made a render of 2,000 cells 1.9 GB.
		return nil, m.errf(m.line("name"), "name %q is %d bytes, more than %d", shortText(m.Name), len(m.Name), MaxNameBytes)
	}
	if err := tomlfile.UnknownError(file, md, [][]string{{"axes"}, {"presets"}, {"exclude"}, {"include"}, {"launch", "baseline"}}, m.lines.Line); err != nil {
		return nil, err
	}
	if fm.MaxCells != nil {
		if *fm.MaxCells < 1 || *fm.MaxCells > math.MaxInt32 {
			return nil, m.errf(m.line("max_cells"), "max_cells must be a positive number, got %d", *fm.MaxCells)
		}
		m.MaxCells = int(*fm.MaxCells)
	}
	switch m.Project {
	case "", "sglang", "flashinfer":
	default:
		return nil, m.errf(m.line("project"), "project %q: want sglang or flashinfer", m.Project)
	}
	if m.Base.Image != "" && m.Base.Python != "" {
		return nil, m.errf(m.line("base"), "base: set image or python, not both")
	}
	if err := ImageRefErr(m.Base.Image); err != nil {
		return nil, m.errf(m.line("base", "image"), "base.image: %v", err)
	}
	if err := textErr(m.Base.Python); err != nil {
		return nil, m.errf(m.line("base", "python"), "base.python: %v", err)
	}
	m.Base.Python = resolvePython(file, m.Base.Python)
	if err := m.loadAxes(md, fm.Axes); err != nil {
		return nil, err
	}
	if err := m.loadPresets(md, fm.Presets); err != nil {
		return nil, err
	}
	if err := m.loadArch(fm.ArchAxis); err != nil {
		return nil, err
	}
	if err := m.loadZip(fm.Zip); err != nil {
		return nil, err
	}
	for i, e := range fm.Exclude {
		x, err := m.parseMatch(e, "exclude", strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		m.Exclude = append(m.Exclude, x)
	}
	for i, e := range fm.Include {
		inc, err := m.parseInclude(e, i)
		if err != nil {
			return nil, err
		}
		m.Include = append(m.Include, inc)
	}
	for _, k := range sortedKeys(fm.IDPrefix) {
		if _, ok := m.axis[k]; !ok {
			return nil, m.errf(m.line("id_prefix", k), "id_prefix: unknown axis %q%s", k, m.axisHint())
		}
		p := fm.IDPrefix[k]
		if p != slug(p) {
			return nil, m.errf(m.line("id_prefix", k), "id_prefix.%s: %q must be lower case letters, digits, '.' and '-'", k, p)
		}
		m.IDPrefix[k] = p
	}
	if err := m.loadLaunch(fm.Launch); err != nil {
		return nil, err
	}
	if err := m.loadRequires(fm.Requires); err != nil {
		return nil, err
	}
	if err := m.checkConflicts(); err != nil {
		return nil, err
	}
	for i, r := range fm.Rules {
		p := r
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(file), p)
		}
		rules, err := LoadRules(p, m)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, m.errf(m.line("rules"), "rules[%d]: %v", i, err)
			}
			return nil, err
		}
		m.RuleFiles = append(m.RuleFiles, p)
		m.rules = append(m.rules, rules...)
	}
	return m, nil
}

// caseMismatch finds a key that the decoder matched to a field of t only
// case-insensitively ("[Axes]"): the format is case-sensitive.
func caseMismatch(md toml.MetaData, t reflect.Type) toml.Key {
	for _, k := range md.Keys() {
		st := t
		for _, part := range k {
			if st.Kind() != reflect.Struct {
				break
			}
			var next reflect.Type
			for i := 0; i < st.NumField(); i++ {
				f := st.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
				if name == part {
					next = f.Type
					break
				}
				if strings.EqualFold(name, part) {
					return k
				}
			}
			if next == nil {
				break
			}
			for next.Kind() == reflect.Pointer || next.Kind() == reflect.Slice {
				next = next.Elem()
			}
			st = next
		}
	}
	return nil
}

func (m *Matrix) errf(line int, format string, args ...any) error {
	if line > 0 {
		return fmt.Errorf("%s:%d: "+format, append([]any{m.File, line}, args...)...)
	}
	return fmt.Errorf("%s: "+format, append([]any{m.File}, args...)...)
}

func (m *Matrix) axisHint() string {
	names := make([]string, len(m.Axes))
	for i, a := range m.Axes {
		names[i] = a.Name
	}
	return " (axes: " + strings.Join(names, ", ") + ")"
}

func (m *Matrix) loadAxes(md toml.MetaData, axes map[string]any) error {
	if len(axes) == 0 {
		return m.errf(m.line("axes"), "no [axes]: a matrix needs at least one axis")
	}
	// Axis order is the order written in the file, never map order.
	var order []string
	seen := map[string]bool{}
	for _, k := range md.Keys() {
		if len(k) >= 2 && k[0] == "axes" && !seen[k[1]] {
			if _, ok := axes[k[1]]; ok {
				seen[k[1]] = true
				order = append(order, k[1])
			}
		}
	}
	for _, name := range sortedKeys(axes) { // anything Keys() missed, deterministically
		if !seen[name] {
			order = append(order, name)
		}
	}
	for _, name := range order {
		line := m.line("axes", name)
		if !nameRe().MatchString(name) || name == "id" {
			return m.errf(line, "axes: name %q must be letters, digits and '_' (and not \"id\")", name)
		}
		a := &Axis{Name: name, Line: line}
		raw := axes[name]
		list, isList := raw.([]any)
		if !isList {
			list = []any{raw}
		}
		if len(list) == 0 {
			return m.errf(line, "axes.%s is empty: an axis needs at least one value", name)
		}
		seenV := map[string]bool{}
		for _, x := range list {
			v, err := toValue(name, x)
			if err != nil {
				return m.errf(line, "axes.%s: %v", name, err)
			}
			key := v.key()
			if seenV[key] {
				return m.errf(line, "axes.%s: value %q appears twice", name, v.Text)
			}
			seenV[key] = true
			a.Values = append(a.Values, v)
		}
		m.axis[name] = len(m.Axes)
		m.Axes = append(m.Axes, a)
	}
	return nil
}

// toValue converts one TOML value of an axis (or a match) to a Value.
func toValue(axis string, x any) (Value, error) {
	if axis == PatchesAxis {
		switch t := x.(type) {
		case string:
			if t == "" {
				return Value{}, fmt.Errorf("empty patch name")
			}
			if err := textErr(t); err != nil {
				return Value{}, err
			}
			return Value{Text: t, List: []string{t}, Kind: "list"}, nil
		case []any:
			v := Value{Kind: "list", List: []string{}}
			seen := map[string]bool{}
			for _, e := range t {
				s, ok := e.(string)
				if !ok || s == "" {
					return Value{}, fmt.Errorf("a patch set is a list of patch names, got %v", e)
				}
				if err := textErr(s); err != nil {
					return Value{}, err
				}
				if seen[s] {
					return Value{}, fmt.Errorf("patch %q twice in one set", s)
				}
				seen[s] = true
				v.List = append(v.List, s)
			}
			v.Text = strings.Join(v.List, ",")
			return v, nil
		}
		return Value{}, fmt.Errorf("a patch set is a list of patch names, got %T", x)
	}
	switch t := x.(type) {
	case string:
		if err := textErr(t); err != nil {
			return Value{}, err
		}
		return Value{Text: t, Kind: "string"}, nil
	case int64:
		return Value{Text: strconv.FormatInt(t, 10), Kind: "int"}, nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return Value{}, fmt.Errorf("value %v is not a finite number", t)
		}
		return Value{Text: strconv.FormatFloat(t, 'g', -1, 64), Kind: "float"}, nil
	case bool:
		return Value{Text: strconv.FormatBool(t), Kind: "bool"}, nil
	}
	return Value{}, fmt.Errorf("values are strings, numbers or booleans, got %s", tomlType(x))
}

func tomlType(x any) string {
	switch x.(type) {
	case []any:
		return "a list"
	case map[string]any:
		return "a table"
	case time.Time:
		return "a date"
	}
	return fmt.Sprintf("%T", x)
}

// key identifies a value for matching: patch sets compare as sets.
func (v Value) key() string {
	if v.Kind == "list" {
		s := append([]string(nil), v.List...)
		sort.Strings(s)
		return "\x00" + strings.Join(s, "\x00")
	}
	return v.Text
}

func (m *Matrix) loadPresets(md toml.MetaData, presets map[string]map[string]map[string]any) error {
	for _, axis := range sortedKeys(presets) {
		ai, ok := m.axis[axis]
		if !ok {
			return m.errf(m.line("presets", axis), "presets.%s: no axis %q%s", axis, axis, m.axisHint())
		}
		if axis == PatchesAxis {
			return m.errf(m.line("presets", axis), "presets.%s: the patches axis cannot have presets", axis)
		}
		m.Axes[ai].Presets = true
		m.Presets[axis] = map[string]*Preset{}
		for _, name := range sortedKeys(presets[axis]) {
			line := m.line("presets", axis, name)
			if !presetRe().MatchString(name) {
				return m.errf(line, "presets.%s: bad preset name %q", axis, name)
			}
			p := &Preset{Name: name, Env: map[string]string{}, Line: line}
			body := presets[axis][name]
			// Flags keep the order written in the file.
			var keys []string
			seen := map[string]bool{}
			for _, k := range md.Keys() {
				if len(k) == 4 && k[0] == "presets" && k[1] == axis && k[2] == name && !seen[k[3]] {
					seen[k[3]] = true
					keys = append(keys, k[3])
				}
			}
			for _, k := range sortedKeys(body) {
				if !seen[k] {
					keys = append(keys, k)
				}
			}
			for _, k := range keys {
				x, ok := body[k]
				if !ok {
					continue
				}
				kl := m.line("presets", axis, name, k)
				switch {
				case envKeyRe().MatchString(k):
					v, err := toValue("", x)
					if err != nil {
						return m.errf(kl, "presets.%s.%s.%s: %v", axis, name, k, err)
					}
					if err := envValueErr(v.Text); err != nil {
						return m.errf(kl, "presets.%s.%s.%s: %v", axis, name, k, err)
					}
					p.Env[k] = v.Text
				case flagKeyRe().MatchString(k):
					args, err := flagArgs(k, x)
					if err != nil {
						return m.errf(kl, "presets.%s.%s: %v", axis, name, err)
					}
					p.Args = append(p.Args, args...)
				default:
					return m.errf(kl, "presets.%s.%s: key %q is neither an environment variable (UPPER_CASE) nor a server flag (--name)", axis, name, k)
				}
			}
			m.Presets[axis][name] = p
		}
		for _, v := range m.Axes[ai].Values {
			if _, ok := m.Presets[axis][v.Text]; !ok {
				return m.errf(m.Axes[ai].Line, "axes.%s: unknown preset %q (presets: %s)", axis, v.Text, strings.Join(sortedKeys(m.Presets[axis]), ", "))
			}
		}
	}
	return nil
}

// flagArgs turns a preset's flag entry into arguments: true gives the bare
// flag, false nothing, a scalar flag and value, a list flag and its values.
func flagArgs(flag string, x any) ([]string, error) {
	switch t := x.(type) {
	case bool:
		if t {
			return []string{flag}, nil
		}
		return nil, nil
	case []any:
		out := []string{flag}
		for _, e := range t {
			v, err := toValue("", e)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", flag, err)
			}
			out = append(out, v.Text)
		}
		return out, nil
	}
	v, err := toValue("", x)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", flag, err)
	}
	return []string{flag, v.Text}, nil
}

var archNames = []string{"sm", "gpu_sm", "arch", "gpu_arch"}

func (m *Matrix) loadArch(name string) error {
	if name == "" {
		for _, n := range archNames {
			if _, ok := m.axis[n]; ok {
				name = n
				break
			}
		}
		if name == "" {
			return nil
		}
	} else if _, ok := m.axis[name]; !ok {
		return m.errf(m.line("arch_axis"), "arch_axis: unknown axis %q%s", name, m.axisHint())
	}
	a := m.Axes[m.axis[name]]
	for _, v := range a.Values {
		if _, _, err := parseSM(v.Text); err != nil {
			return m.errf(a.Line, "axes.%s (the GPU architecture axis): %v", name, err)
		}
	}
	m.ArchAxis = name
	return nil
}

// parseSM reads a compute capability: "12.0", "12", "120", "sm_120", "sm120a".
func parseSM(s string) (major, minor int, err error) { return smver.Parse(s) }

func (m *Matrix) loadZip(zip [][]string) error {
	inZip := map[string]bool{}
	for i, g := range zip {
		line := m.line("zip")
		if len(g) < 2 {
			return m.errf(line, "zip[%d]: a zip group names at least two axes", i)
		}
		n := -1
		for _, name := range g {
			ai, ok := m.axis[name]
			if !ok {
				return m.errf(line, "zip[%d]: unknown axis %q%s", i, name, m.axisHint())
			}
			if inZip[name] {
				return m.errf(line, "zip[%d]: axis %q is already in a zip group", i, name)
			}
			inZip[name] = true
			if l := len(m.Axes[ai].Values); n >= 0 && l != n {
				return m.errf(line, "zip[%d]: axes %s have unequal lengths (%s)", i, strings.Join(g, ", "), zipLens(m, g))
			} else {
				n = l
			}
		}
		m.Zip = append(m.Zip, append([]string(nil), g...))
	}
	return nil
}

func zipLens(m *Matrix, g []string) string {
	var s []string
	for _, name := range g {
		s = append(s, fmt.Sprintf("%s has %d", name, len(m.Axes[m.axis[name]].Values)))
	}
	return strings.Join(s, ", ")
}

// parseMatch reads an exclude entry or a baseline table. A list means "any
// of"; for the patches axis a list of names is one set and a list of lists
// is any of those sets (patches = [] matches the empty set).
func (m *Matrix) parseMatch(e map[string]any, where ...string) (*Match, error) {
	line := m.line(where...)
	what := strings.Join(where, ".")
	if len(where) == 2 {
		if _, err := strconv.Atoi(where[1]); err == nil {
			what = where[0] + "[" + where[1] + "]"
		}
	}
	if len(e) == 0 {
		return nil, m.errf(line, "%s: empty entry matches every cell", what)
	}
	x := &Match{Values: map[string][]Value{}, Line: line}
	for _, k := range sortedKeys(e) {
		kl := m.line(append(where, k)...)
		ai, ok := m.axis[k]
		if !ok {
			return nil, m.errf(kl, "%s: unknown axis %q%s", what, k, m.axisHint())
		}
		vals, err := matchValues(k, e[k])
		if err != nil {
			return nil, m.errf(kl, "%s.%s: %v", what, k, err)
		}
		if m.Axes[ai].Presets {
			for _, v := range vals {
				if _, ok := m.Presets[k][v.Text]; !ok {
					return nil, m.errf(kl, "%s.%s: unknown preset %q", what, k, v.Text)
				}
			}
		}
		x.Values[k] = vals
	}
	return x, nil
}

func matchValues(axis string, raw any) ([]Value, error) {
	list, isList := raw.([]any)
	if axis == PatchesAxis {
		anyOf := isList && len(list) > 0
		for _, e := range list {
			if _, ok := e.([]any); !ok {
				anyOf = false
			}
		}
		if !anyOf {
			v, err := toValue(axis, raw)
			if err != nil {
				return nil, err
			}
			return []Value{v}, nil
		}
	} else if !isList {
		list = []any{raw}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("an empty list matches nothing")
	}
	var out []Value
	for _, e := range list {
		v, err := toValue(axis, e)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (m *Matrix) parseInclude(e map[string]any, i int) (*Include, error) {
	idx := strconv.Itoa(i)
	line := m.line("include", idx)
	inc := &Include{Values: map[string]Value{}, Env: map[string]string{}, Line: line}
	for _, k := range sortedKeys(e) {
		kl := m.line("include", idx, k)
		switch k {
		case "id":
			s, ok := e[k].(string)
			if !ok || s == "" || slug(s) != s {
				return nil, m.errf(kl, "include[%d].id: want a non-empty id of [a-z0-9.-]", i)
			}
			inc.ID = s
			continue
		case "env":
			t, ok := e[k].(map[string]any)
			if !ok {
				return nil, m.errf(kl, "include[%d].env: want a table", i)
			}
			for _, name := range sortedKeys(t) {
				if !envKeyRe().MatchString(name) {
					return nil, m.errf(kl, "include[%d].env: %q is not an environment variable name", i, name)
				}
				v, err := toValue("", t[name])
				if err != nil {
					return nil, m.errf(kl, "include[%d].env.%s: %v", i, name, err)
				}
				if err := envValueErr(v.Text); err != nil {
					return nil, m.errf(kl, "include[%d].env.%s: %v", i, name, err)
				}
				inc.Env[name] = v.Text
			}
			continue
		case "args":
			l, ok := e[k].([]any)
			if !ok {
				return nil, m.errf(kl, "include[%d].args: want a list of strings", i)
			}
			for _, a := range l {
				s, ok := a.(string)
				if !ok {
					return nil, m.errf(kl, "include[%d].args: want a list of strings", i)
				}
				if err := textErr(s); err != nil {
					return nil, m.errf(kl, "include[%d].args: %v", i, err)
				}
				inc.Args = append(inc.Args, s)
			}
			continue
		}
		ai, ok := m.axis[k]
		if !ok {
			return nil, m.errf(kl, "include[%d]: unknown axis %q%s", i, k, m.axisHint())
		}
		v, err := toValue(k, e[k])
		if err != nil {
			return nil, m.errf(kl, "include[%d].%s: %v (an include names one value per axis)", i, k, err)
		}
		if m.Axes[ai].Presets {
			if _, ok := m.Presets[k][v.Text]; !ok {
				return nil, m.errf(kl, "include[%d].%s: unknown preset %q", i, k, v.Text)
			}
		}
		if k == m.ArchAxis {
			if _, _, err := parseSM(v.Text); err != nil {
				return nil, m.errf(kl, "include[%d].%s: %v", i, k, err)
			}
		}
		inc.Values[k] = v
	}
	if len(inc.Values) == 0 {
		return nil, m.errf(line, "include[%d]: names no axis", i)
	}
	if len(inc.Env) == 0 && len(inc.Args) == 0 && inc.ID == "" && len(inc.Values) < len(m.Axes) {
		return nil, m.errf(line, "include[%d]: names only some axes and adds no env or args: it would do nothing", i)
	}
	return inc, nil
}

// checkConflicts refuses what would make one setting silently win over
// another: two preset axes setting the same variable or flag, a preset flag
// that launch.command already carries, a preset variable launch.env sets.
func (m *Matrix) checkConflicts() error {
	envOwner := map[string]string{}
	flagOwner := map[string]string{}
	for k := range m.Launch.Env {
		envOwner[k] = "launch.env"
	}
	for _, s := range m.Launch.Command {
		if flagKeyRe().MatchString(s) {
			flagOwner[s] = "launch.command"
		} else if f, _, ok := strings.Cut(s, "="); ok && flagKeyRe().MatchString(f) {
			flagOwner[f] = "launch.command"
		}
	}
	for _, a := range m.Axes {
		if !a.Presets {
			continue
		}
		envHere := map[string]bool{}
		flagHere := map[string]bool{}
		for _, name := range sortedKeys(m.Presets[a.Name]) {
			p := m.Presets[a.Name][name]
			for _, k := range sortedKeys(p.Env) {
				if o, ok := envOwner[k]; ok && !envHere[k] {
					return m.errf(m.line("presets", a.Name, name, k), "presets.%s.%s sets %s, which %s also sets", a.Name, name, k, o)
				}
				envHere[k] = true
			}
			for _, f := range p.Args {
				if !flagKeyRe().MatchString(f) {
					continue
				}
				if o, ok := flagOwner[f]; ok && !flagHere[f] {
					return m.errf(m.line("presets", a.Name, name, f), "presets.%s.%s sets %s, which %s also sets", a.Name, name, f, o)
				}
				flagHere[f] = true
			}
		}
		for k := range envHere {
			envOwner[k] = "presets." + a.Name
		}
		for k := range flagHere {
			flagOwner[k] = "presets." + a.Name
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// CheckPatches calls check for every patch name the matrix uses (axis values
// and include entries) and returns the first error with its file and line.
// The command passes the catalog's lookup; matrix does not load the catalog.
func (m *Matrix) CheckPatches(check func(name string) error) error {
	if ai, ok := m.axis[PatchesAxis]; ok {
		for _, v := range m.Axes[ai].Values {
			for _, p := range v.List {
				if err := check(p); err != nil {
					return m.errf(m.Axes[ai].Line, "axes.patches: %v", err)
				}
			}
		}
	}
	for _, inc := range m.Include {
		if v, ok := inc.Values[PatchesAxis]; ok {
			for _, p := range v.List {
				if err := check(p); err != nil {
					return m.errf(inc.Line, "include: %v", err)
				}
			}
		}
	}
	matches := append([]*Match(nil), m.Exclude...)
	if m.Launch.Baseline != nil {
		matches = append(matches, m.Launch.Baseline)
	}
	for _, x := range matches {
		for _, v := range x.Values[PatchesAxis] {
			for _, p := range v.List {
				if err := check(p); err != nil {
					return m.errf(x.Line, "patches: %v", err)
				}
			}
		}
	}
	return nil
}

// resolvePython makes a relative base.python path (one with a directory, such
// as "venv/bin/python3") relative to the matrix file's directory, as rules
// files and workdir are; a bare command name ("python3") is left for PATH.
func resolvePython(file, py string) string {
	if py == "" || filepath.IsAbs(py) || !strings.ContainsRune(filepath.ToSlash(py), '/') {
		return py
	}
	base, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return py
	}
	return filepath.Join(base, py)
}

// MaxNameBytes bounds a matrix's name.
const MaxNameBytes = 256

// textErr refuses a value that no line of a script can carry: a NUL, a
// line break or another control character but a tab (shell.Check).
func textErr(s string) error {
	if err := shell.Check(s); err != nil {
		return fmt.Errorf("value %w: a script carries each value on its line", err)
	}
	return nil
}

// ImageRefErr refuses an image reference that a program taking it as an
// argument could read as an option or as more than one word: one that
// starts with '-', or holds a space or a control character. What a
// reference is beyond that is the image package's to say.
func ImageRefErr(s string) error {
	switch {
	case s == "":
		return nil
	case strings.HasPrefix(s, "-"):
		return fmt.Errorf("%q is not an image reference (it starts with '-', as an option does)", shortText(s))
	case strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) }) >= 0:
		return fmt.Errorf("%q is not an image reference (it holds a space or a control character)", shortText(s))
	}
	return nil
}

// hasControl reports whether s holds a control character (C0, DEL or C1).
func hasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }) >= 0
}

// line is the line of the file that defines key (tomlfile.Lines.Line).
func (m *Matrix) line(key ...string) int { return m.lines.Line(key) }

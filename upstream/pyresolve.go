package upstream

import (
	"fmt"
	"sort"
	"strings"
)

// pyPackage is the Python modules of one package tree (flashinfer at one
// revision), each read when a name is first looked up in it.
type pyPackage struct {
	root  string            // "flashinfer"
	files map[string]string // dotted module name → file path in the tree
	// load reads and parses one module (readPyModule of the file's bytes).
	load func(mod, file string, pkg bool) (*pyModule, error)
	mods map[string]*pyModule
	errs map[string]error
}

// newPyPackage indexes the .py files of paths (slash paths in the tree)
// under dir, the directory of package root ("flashinfer", or
// "python/flashinfer" in some layouts).
func newPyPackage(root, dir string, paths []string, read func(string) ([]byte, error)) *pyPackage {
	p := &pyPackage{root: root, files: map[string]string{}, mods: map[string]*pyModule{}, errs: map[string]error{},
		load: func(mod, file string, pkg bool) (*pyModule, error) {
			data, err := read(file)
			if err != nil {
				return nil, err
			}
			return readPyModule(data, mod, pkg), nil
		}}
	for _, f := range paths {
		rel, ok := strings.CutPrefix(f, dir+"/")
		if !ok || !strings.HasSuffix(rel, ".py") {
			continue
		}
		mod := strings.TrimSuffix(rel, ".py")
		mod = strings.TrimSuffix(mod, "/__init__")
		if mod == "__init__" {
			mod = ""
		}
		name := root
		if mod != "" {
			name += "." + strings.ReplaceAll(mod, "/", ".")
		}
		if !isDotted(name) {
			continue
		}
		p.files[name] = f
	}
	return p
}

// module reads module mod; nil and an error when it cannot be read.
func (p *pyPackage) module(mod string) (*pyModule, error) {
	if m, ok := p.mods[mod]; ok {
		return m, nil
	}
	if err, ok := p.errs[mod]; ok {
		return nil, err
	}
	f, ok := p.files[mod]
	if !ok {
		return nil, fmt.Errorf("no module %s", mod)
	}
	m, err := p.load(mod, f, strings.HasSuffix(f, "__init__.py"))
	if err != nil {
		p.errs[mod] = err
		return nil, err
	}
	p.mods[mod] = m
	return m, nil
}

func (p *pyPackage) inside(mod string) bool {
	return mod == p.root || strings.HasPrefix(mod, p.root+".")
}

// Resolution states.
const (
	Present = "present"
	Missing = "missing"
	Unknown = "unknown"
)

// pyResolved is what a dotted name is in the package.
type pyResolved struct {
	State  string // Present, Missing or Unknown
	Kind   string // "module", "function", "class", "value" (present)
	File   string // where it is defined
	Line   int
	Params []string // function or constructor: the keyword-able parameters
	VarKw  bool     // takes **kwargs
	Known  bool     // Params were read
	Why    string   // missing or unknown: why; present: what was not checked
}

// ref is a step of a resolution: a module, or a binding in module mod.
type ref struct {
	mod  string
	b    *pyBinding
	name string // the binding's name in mod
	ext  string // a name bound to something outside the package
}

// maxHops bounds the re-exports followed for one name.
const maxHops = 64

// resolve looks the dotted path up the way Python's import and attribute
// access would find it: a module's names (following its imports and
// `import *`), else its submodule; a class's members (and those of its
// bases in the package). Past a function or a value, the rest of the path
// is not checked.
func (p *pyPackage) resolve(path string) pyResolved {
	parts := strings.Split(path, ".")
	if parts[0] != p.root {
		return pyResolved{State: Unknown, Why: path + " is not in " + p.root}
	}
	if _, ok := p.files[p.root]; !ok {
		return pyResolved{State: Missing, Why: "no package " + p.root}
	}
	cur := ref{mod: p.root}
	hops := 0
	for i := 1; i < len(parts); i++ {
		name := parts[i]
		where := strings.Join(parts[:i], ".")
		switch {
		case cur.ext != "":
			return pyResolved{State: Present, Kind: "value", Why: where + " is " + cur.ext + ", outside " + p.root + ": " + strings.Join(parts[i:], ".") + " not checked"}
		case cur.b == nil && isDunder(name):
			r := p.result(cur)
			r.Kind, r.File, r.Why = "value", "", where+"."+name+" is a module attribute Python sets"
			return r
		case cur.b == nil:
			next, res, ok := p.lookup(cur.mod, name, &hops)
			if !ok {
				return res
			}
			cur = next
		case cur.b.kind == "class":
			st, why := p.member(cur, name, &hops)
			if st != Present {
				return pyResolved{State: st, Why: why}
			}
			r := p.result(cur)
			r.Kind, r.Params, r.VarKw, r.Known = "value", nil, false, false
			if i+1 < len(parts) {
				r.Why = strings.Join(parts[:i+1], ".") + " is a class member: " + strings.Join(parts[i+1:], ".") + " not checked"
			}
			return r
		default:
			r := p.result(cur)
			r.Why = where + " is a " + r.Kind + ": " + strings.Join(parts[i:], ".") + " not checked"
			return r
		}
	}
	return p.result(cur)
}

func (p *pyPackage) result(c ref) pyResolved {
	r := pyResolved{State: Present}
	switch {
	case c.ext != "":
		r.Kind, r.Why = "value", "re-exported from "+c.ext
	case c.b == nil:
		r.Kind, r.File = "module", p.files[c.mod]
	default:
		r.File, r.Line = p.files[c.mod], c.b.line
		r.Params, r.VarKw, r.Known = c.b.params, c.b.varKw, c.b.known
		switch c.b.kind {
		case "def":
			r.Kind = "function"
		case "class":
			r.Kind = "class"
		default:
			r.Kind, r.Known = "value", false
		}
	}
	return r
}

// lookup finds name in module mod.
func (p *pyPackage) lookup(mod, name string, hops *int) (ref, pyResolved, bool) {
	*hops++
	if *hops > maxHops {
		return ref{}, pyResolved{State: Unknown, Why: fmt.Sprintf("more than %d re-exports followed for %s.%s", maxHops, mod, name)}, false
	}
	m, err := p.module(mod)
	if err != nil {
		return ref{}, pyResolved{State: Unknown, Why: err.Error()}, false
	}
	sub := mod + "." + name
	if bs := m.names[name]; len(bs) > 0 {
		var defs []*pyBinding
		var value *pyBinding
		for _, b := range bs {
			switch b.kind {
			case "def", "class":
				defs = append(defs, b)
			case "value":
				value = b
			}
		}
		if len(defs) > 0 {
			return ref{mod: mod, b: mergeDefs(defs), name: name}, pyResolved{}, true
		}
		for _, b := range bs {
			if b.kind != "import" {
				continue
			}
			if r, ok := p.follow(b, mod, name, hops); ok {
				return r, pyResolved{}, true
			}
		}
		if value != nil {
			return ref{mod: mod, b: value, name: name}, pyResolved{}, true
		}
	}
	for _, star := range m.stars {
		if !p.inside(star) {
			continue
		}
		if r, _, ok := p.lookup(star, name, hops); ok {
			return r, pyResolved{}, true
		}
	}
	if _, ok := p.files[sub]; ok {
		return ref{mod: sub}, pyResolved{}, true
	}
	switch {
	case m.dynamic:
		return ref{}, pyResolved{State: Unknown, Why: mod + " defines __getattr__: " + name + " may be made at run time"}, false
	case len(m.stars) > 0 && !allInside(p, m.stars):
		return ref{}, pyResolved{State: Unknown, Why: mod + " imports * from outside " + p.root}, false
	case len(m.names[name]) > 0:
		return ref{}, pyResolved{State: Missing, Why: fmt.Sprintf("%s imports %s from %s, which has no such name (%s)", mod, name, m.names[name][0].module, p.files[mod])}, false
	}
	return ref{}, pyResolved{State: Missing, Why: mod + " has no name " + name}, false
}

func allInside(p *pyPackage, mods []string) bool {
	for _, m := range mods {
		if !p.inside(m) {
			return false
		}
	}
	return true
}

// follow resolves an import binding of name in mod.
func (p *pyPackage) follow(b *pyBinding, mod, name string, hops *int) (ref, bool) {
	if !p.inside(b.module) {
		what := b.module
		if b.name != "" {
			what += "." + b.name
		}
		return ref{ext: what}, true
	}
	if b.name == "" {
		_, ok := p.files[b.module]
		return ref{mod: b.module}, ok
	}
	if b.module == mod && b.name == name {
		// `from . import name` in name's own package: the submodule.
		_, ok := p.files[mod+"."+name]
		return ref{mod: mod + "." + name}, ok
	}
	r, _, ok := p.lookup(b.module, b.name, hops)
	return r, ok
}

// mergeDefs is one binding for a name defined more than once (under if and
// else, say): any of the definitions' keywords is accepted.
func mergeDefs(defs []*pyBinding) *pyBinding {
	if len(defs) == 1 {
		return defs[0]
	}
	m := *defs[0]
	seen := map[string]bool{}
	m.params = nil
	for _, d := range defs {
		m.varKw = m.varKw || d.varKw
		m.known = m.known && d.known
		for _, q := range d.params {
			if !seen[q] {
				seen[q] = true
				m.params = append(m.params, q)
			}
		}
		if d.kind == "class" && m.members != nil {
			for k := range d.members {
				m.members[k] = true
			}
		}
	}
	sort.Strings(m.params)
	return &m
}

// member looks name up in class c and its bases in the package.
func (p *pyPackage) member(c ref, name string, hops *int) (string, string) {
	if c.b.members[name] || isDunder(name) {
		return Present, ""
	}
	var outside []string
	for _, base := range c.b.bases {
		base, _, _ = strings.Cut(base, "[")
		base = strings.TrimSpace(base)
		if plainBases[base] {
			continue // adds no member sglang would name
		}
		head, rest, _ := strings.Cut(base, ".")
		r, _, ok := p.lookup(c.mod, head, hops)
		for ok && rest != "" && r.b == nil && r.ext == "" {
			var part string
			part, rest, _ = strings.Cut(rest, ".")
			r, _, ok = p.lookup(r.mod, part, hops)
		}
		if !ok || r.ext != "" || r.b == nil || r.b.kind != "class" {
			outside = append(outside, base)
			continue
		}
		if st, _ := p.member(r, name, hops); st == Present {
			return Present, ""
		}
	}
	cls := c.mod + "." + c.name
	if len(outside) > 0 {
		return Unknown, fmt.Sprintf("class %s (%s) has no member %s; its bases %s are not read", cls, p.files[c.mod], name, strings.Join(outside, ", "))
	}
	return Missing, fmt.Sprintf("class %s (%s) has no member %s", cls, p.files[c.mod], name)
}

// plainBases are base classes that give their subclasses no members of
// their own beyond dunders (an Enum's members are all in its body).
var plainBases = map[string]bool{
	"object": true, "Enum": true, "IntEnum": true, "StrEnum": true, "Flag": true, "IntFlag": true,
	"enum.Enum": true, "enum.IntEnum": true, "enum.StrEnum": true, "enum.Flag": true, "enum.IntFlag": true,
	"ABC": true, "abc.ABC": true, "str": true, "int": true,
}

func isDunder(s string) bool {
	return len(s) > 4 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}

package upstream

import (
	"strings"
)

// pyModule is what one Python module defines at module level, read
// statically: functions with their parameters, classes with their members,
// assigned names, and the names it imports (re-exports).
type pyModule struct {
	names   map[string][]*pyBinding
	stars   []string // modules imported with `from M import *`, absolute
	dynamic bool     // a module-level __getattr__: any name may exist
}

// pyBinding is one module-level binding of a name (a name bound under
// several branches has several).
type pyBinding struct {
	kind string // "def", "class", "value" or "import"
	line int
	// def (and class, for its constructor): the parameters a keyword can
	// name, and whether **kwargs takes any; known is false when they could
	// not be read (a class without __init__ that is no dataclass).
	params []string
	varKw  bool
	known  bool
	// class: the names its body binds and the self.X it assigns; its bases
	// as written.
	members map[string]bool
	bases   []string
	// import: the absolute module and the name taken from it ("" for the
	// module itself: `import a.b as c`, `from . import b` reads as module
	// a.b through the name).
	module, name string
}

// readPyModule reads the Python module of dotted name mod (pkg is set for
// a package's __init__.py).
func readPyModule(src []byte, mod string, pkg bool) *pyModule {
	s := newPySource(src)
	m := &pyModule{names: map[string][]*pyBinding{}}
	base := mod // the package relative imports start from
	if !pkg {
		if i := strings.LastIndexByte(mod, '.'); i >= 0 {
			base = mod[:i]
		} else {
			base = ""
		}
	}
	var classes = map[int]*pyBinding{} // class line → its binding
	var decorators []string
	for i, l := range s.lines {
		if strings.HasPrefix(l.text, "@") {
			decorators = append(decorators, l.text)
			continue
		}
		decos := decorators
		decorators = nil
		switch {
		case l.scope < 0:
			m.readTop(s, i, l, base, decos, classes)
		case classes[l.scope] != nil:
			readMember(classes[l.scope], l)
		}
		// self.X = ... anywhere inside a class's methods.
		if strings.HasPrefix(l.text, "self.") {
			for j := l.scope; j >= 0; j = s.lines[j].scope {
				if c := classes[j]; c != nil {
					if lhs, _, ok := cutTop(l.text, '='); ok {
						n := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lhs), "self."))
						if i := strings.IndexAny(n, ":[ ."); i >= 0 {
							n = n[:i]
						}
						if isDotted(n) {
							c.members[n] = true
						}
					}
					break
				}
			}
		}
	}
	// A dataclass without __init__ takes its fields.
	for _, c := range classes {
		if !c.known && c.params != nil {
			c.known = true
		}
	}
	return m
}

func (m *pyModule) add(name string, b *pyBinding) { m.names[name] = append(m.names[name], b) }

// readTop reads one module-level logical line.
func (m *pyModule) readTop(s *pySource, i int, l pyLine, base string, decos []string, classes map[int]*pyBinding) {
	text := l.text
	line := s.line(l.start)
	switch firstWord(text) {
	case "def", "async":
		name, params, varKw := readDef(text)
		if name == "" {
			return
		}
		if name == "__getattr__" {
			m.dynamic = true
		}
		m.add(name, &pyBinding{kind: "def", line: line, params: params, varKw: varKw, known: true})
	case "class":
		name, bases := readClass(text)
		if name == "" {
			return
		}
		b := &pyBinding{kind: "class", line: line, members: map[string]bool{}, bases: bases}
		for _, d := range decos {
			if strings.HasPrefix(d, "@dataclass") || strings.HasPrefix(d, "@dataclasses.dataclass") {
				b.params = []string{} // fields follow; known once read
			}
		}
		m.add(name, b)
		classes[i] = b
	case "from":
		mod, names, ok := strings.Cut(strings.TrimSpace(text[len("from"):]), " import ")
		if !ok {
			return
		}
		abs, ok := absModule(strings.TrimSpace(mod), base)
		if !ok {
			return
		}
		for _, n := range splitTop(strings.Trim(strings.TrimSpace(names), "()")) {
			name, alias := importName(n)
			if name == "*" {
				m.stars = append(m.stars, abs)
				continue
			}
			if isDotted(name) && !strings.Contains(name, ".") && isDotted(alias) {
				m.add(alias, &pyBinding{kind: "import", line: line, module: abs, name: name})
			}
		}
	case "import":
		for _, n := range splitTop(text[len("import"):]) {
			name, alias := importName(n)
			if !isDotted(name) {
				continue
			}
			if strings.Contains(strings.TrimSpace(n), " as ") {
				m.add(alias, &pyBinding{kind: "import", line: line, module: name})
			} else {
				head, _, _ := strings.Cut(name, ".")
				m.add(head, &pyBinding{kind: "import", line: line, module: head})
			}
		}
	default:
		for _, n := range assignedNames(text) {
			m.add(n, &pyBinding{kind: "value", line: line})
		}
	}
}

// readMember reads one line of a class body into c.
func readMember(c *pyBinding, l pyLine) {
	text := l.text
	switch firstWord(text) {
	case "def", "async":
		name, params, varKw := readDef(text)
		if name == "" {
			return
		}
		c.members[name] = true
		if name == "__init__" {
			if len(params) > 0 {
				params = params[1:] // self
			}
			c.params, c.varKw, c.known = params, varKw, true
		}
	case "class":
		if name, _ := readClass(text); name != "" {
			c.members[name] = true
		}
	default:
		for _, n := range assignedNames(text) {
			c.members[n] = true
		}
		// A dataclass field: `name: type [= default]`.
		if c.params != nil && !c.known {
			if lhs, _, ok := cutTop(text, ':'); ok && isDotted(strings.TrimSpace(lhs)) && !strings.Contains(lhs, ".") {
				c.params = append(c.params, strings.TrimSpace(lhs))
			}
		}
	}
}

// absModule resolves a module name as written in `from X import` inside
// package base: ".x" is base.x, "..x" base's parent's x.
func absModule(mod, base string) (string, bool) {
	dots := len(mod) - len(strings.TrimLeft(mod, "."))
	if dots == 0 {
		return mod, isDotted(mod)
	}
	pkg := base
	for range dots - 1 {
		i := strings.LastIndexByte(pkg, '.')
		if i < 0 {
			return "", false
		}
		pkg = pkg[:i]
	}
	rest := mod[dots:]
	if rest == "" {
		return pkg, pkg != ""
	}
	if pkg == "" {
		return rest, isDotted(rest)
	}
	return pkg + "." + rest, isDotted(rest)
}

// readDef reads "def NAME(PARAMS) ...:": the name, the parameters a
// keyword can name (not those before "/"), and whether it takes **kwargs.
func readDef(text string) (name string, params []string, varKw bool) {
	text = strings.TrimPrefix(text, "async ")
	rest := strings.TrimSpace(strings.TrimPrefix(text, "def "))
	open := strings.IndexByte(rest, '(')
	if open < 0 {
		return "", nil, false
	}
	name = strings.TrimSpace(rest[:open])
	if !isDotted(name) || strings.Contains(name, ".") {
		return "", nil, false
	}
	end := parenEnd([]byte(rest), open)
	if end < 0 {
		return "", nil, false
	}
	params = []string{}
	for _, p := range splitTop(rest[open+1 : end-1]) {
		p = strings.TrimSpace(p)
		p, _, _ = cutTop(p, '=')
		p, _, _ = cutTop(p, ':')
		p = strings.TrimSpace(p)
		switch {
		case p == "" || p == "*":
		case p == "/":
			params = params[:0] // positional-only: no keyword names them
		case strings.HasPrefix(p, "**"):
			varKw = true
		case strings.HasPrefix(p, "*"):
		case isDotted(p) && !strings.Contains(p, "."):
			params = append(params, p)
		}
	}
	return name, params, varKw
}

// readClass reads "class NAME(BASES):".
func readClass(text string) (string, []string) {
	rest := strings.TrimSpace(strings.TrimPrefix(text, "class "))
	i := strings.IndexAny(rest, "(:")
	if i < 0 {
		return "", nil
	}
	name := strings.TrimSpace(rest[:i])
	if !isDotted(name) || strings.Contains(name, ".") {
		return "", nil
	}
	var bases []string
	if rest[i] == '(' {
		if end := parenEnd([]byte(rest), i); end > 0 {
			for _, b := range splitTop(rest[i+1 : end-1]) {
				b = strings.TrimSpace(b)
				if b != "" && !strings.Contains(b, "=") {
					bases = append(bases, b)
				}
			}
		}
	}
	return name, bases
}

// assignedNames are the names a module- or class-level line binds:
// `a = ...`, `a: T = ...`, `a: T`, `a, b = ...`, `a = b = ...`.
func assignedNames(text string) []string {
	if w := firstWord(text); w == "" || pyKeywords[w] {
		return nil
	}
	var out []string
	rest := text
	for {
		lhs, rhs, ok := cutTop(rest, '=')
		if !ok {
			break
		}
		for _, n := range splitTop(strings.Trim(strings.TrimSpace(lhs), "()")) {
			n, _, _ = cutTop(n, ':')
			if n = strings.TrimSpace(n); isDotted(n) && !strings.Contains(n, ".") {
				out = append(out, n)
			}
		}
		rest = rhs
	}
	if len(out) == 0 {
		// An annotation alone: `name: T`.
		if lhs, _, ok := cutTop(text, ':'); ok {
			if n := strings.TrimSpace(lhs); isDotted(n) && !strings.Contains(n, ".") {
				out = append(out, n)
			}
		}
	}
	return out
}

// pyKeywords start statements that bind no name by assignment.
var pyKeywords = map[string]bool{
	"if": true, "elif": true, "else": true, "for": true, "while": true, "try": true, "except": true,
	"finally": true, "with": true, "return": true, "raise": true, "assert": true, "del": true,
	"pass": true, "break": true, "continue": true, "global": true, "nonlocal": true, "lambda": true,
	"yield": true, "async": true, "await": true, "match": true, "case": true, "print": true,
}

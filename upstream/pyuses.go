package upstream

import (
	"slices"
	"strings"
)

// PyUse is one name of a package that a Python file imports or reaches
// through an imported name, read statically: `from flashinfer.comm import
// X`, `import flashinfer.comm as c` then `c.X(...)`, `flashinfer.x.y(...)`,
// and names assigned from those (`_comm = c`, `f = c.X`).
type PyUse struct {
	// Path is the dotted name used: "flashinfer.comm.allreduce_fusion",
	// "flashinfer.comm" for a module import.
	Path string
	Line int // 1-based line of the first use in the file
	// Calls counts the call sites; Kwargs are the keyword arguments they
	// pass (sorted), Guarded those passed only under a condition (a
	// `kw["x"] = ...` inside an if), and Unread the `**name` expansions whose
	// keys could not be read.
	Calls   int
	Kwargs  []string
	Guarded []string
	Unread  []string
	// Star is set for `from PATH import *`: the names it brings are not
	// known.
	Star bool
	// Tried is set when every use is inside a try block (of its own def):
	// the file copes with the name's absence.
	Tried bool
}

// ReadPyUses lists the names under package root (a top-level package
// name: "flashinfer") that the Python source src uses, in order of first
// use. A name imported (or assigned from an imported name) in a def stands
// for it in that def and the defs inside it; one bound at module level,
// also under if or try, everywhere a def does not bind it to something
// else by an import.
func ReadPyUses(src []byte, root string) []PyUse {
	if !strings.Contains(string(src), root) {
		return nil
	}
	s := newPySource(src)
	r := &useReader{s: s, root: root, bind: map[bindKey]string{}, uses: map[string]*PyUse{}, importLine: map[int]bool{}}
	r.imports()
	r.aliases()
	r.scan()
	slices.SortStableFunc(r.order, func(a, b string) int { return r.uses[a].Line - r.uses[b].Line })
	out := make([]PyUse, 0, len(r.order))
	for _, p := range r.order {
		u := r.uses[p]
		u.Kwargs = sortedSet(u.Kwargs)
		u.Guarded = sortedSet(u.Guarded)
		u.Unread = sortedSet(u.Unread)
		// A keyword passed plainly somewhere is not only guarded.
		u.Guarded = slices.DeleteFunc(u.Guarded, func(k string) bool { return slices.Contains(u.Kwargs, k) })
		out = append(out, *u)
	}
	return out
}

type useReader struct {
	s          *pySource
	root       string
	bind       map[bindKey]string // a name in a scope → dotted path; "" for a name bound to something else
	uses       map[string]*PyUse
	order      []string
	importLine map[int]bool            // logical lines that are imports
	globals    map[int]map[string]bool // per def line, the names it declares global
}

func (r *useReader) under(p string) bool { return p == r.root || strings.HasPrefix(p, r.root+".") }

func (r *useReader) use(p string, off int) *PyUse {
	tried := false
	if li := r.s.lineAt(off); li >= 0 {
		tried = r.s.inTry(li)
	}
	u, ok := r.uses[p]
	if !ok {
		u = &PyUse{Path: p, Line: r.s.line(off), Tried: tried}
		r.uses[p] = u
		r.order = append(r.order, p)
		return u
	}
	if off < r.s.starts[u.Line-1] {
		u.Line = r.s.line(off)
	}
	u.Tried = u.Tried && tried
	return u
}

// imports reads the import statements (after a `try:` or an `if ...:` on
// the same line too).
func (r *useReader) imports() {
	for i, l := range r.s.lines {
		text := l.text
		if j := strings.Index(text, ": import "); j >= 0 {
			text = text[j+2:]
		} else if j := strings.Index(text, ": from "); j >= 0 {
			text = text[j+2:]
		}
		scope := r.s.enclosingDef(i)
		switch firstWord(text) {
		case "from":
			mod, names, ok := strings.Cut(strings.TrimSpace(text[len("from"):]), " import ")
			mod = strings.TrimSpace(mod)
			if !ok {
				continue
			}
			inside := r.under(mod)
			if inside {
				r.importLine[i] = true
			}
			names = strings.Trim(strings.TrimSpace(names), "()")
			for _, n := range splitTop(names) {
				name, alias := importName(n)
				switch {
				case name == "*" && inside:
					r.use(mod, l.start).Star = true
				case !isDotted(name) || !isDotted(alias):
				case !inside:
					r.bind[bindKey{scope, alias}] = "" // another package's name
				default:
					p := mod + "." + name
					r.bind[bindKey{scope, alias}] = p
					r.use(p, l.start)
				}
			}
		case "import":
			for _, n := range splitTop(text[len("import"):]) {
				name, alias := importName(n)
				if !isDotted(name) {
					continue
				}
				target := name
				if !strings.Contains(strings.TrimSpace(n), " as ") {
					alias, _, _ = strings.Cut(name, ".")
					target = alias
				}
				if !r.under(name) {
					r.bind[bindKey{scope, alias}] = ""
					continue
				}
				r.importLine[i] = true
				r.use(name, l.start)
				r.bind[bindKey{scope, alias}] = target
			}
		}
	}
}

// bindKey is a name in a scope: the line of its def, -1 for the module.
type bindKey struct {
	scope int
	name  string
}

// lookup is what name stands for on logical line li: its binding in the
// innermost def that binds it, else at module level; false when it is
// bound to nothing under the package.
func (r *useReader) lookup(name string, li int) (string, bool) {
	for d := r.s.enclosingDef(li); ; d = r.s.enclosingDef(d) {
		if p, ok := r.bind[bindKey{d, name}]; ok {
			return p, p != ""
		}
		if d < 0 {
			return "", false
		}
	}
}

// assignScope is the scope an assignment on line li binds its target in:
// its def's, or the module's when the def declares the name global.
func (r *useReader) assignScope(name string, li int) int {
	d := r.s.enclosingDef(li)
	if d < 0 {
		return -1
	}
	if r.globals == nil {
		// Every def's `global` names, read once.
		r.globals = map[int]map[string]bool{}
		for i, l := range r.s.lines {
			if !strings.HasPrefix(l.text, "global ") {
				continue
			}
			e := r.s.enclosingDef(i)
			if r.globals[e] == nil {
				r.globals[e] = map[string]bool{}
			}
			for _, n := range strings.Split(l.text[len("global "):], ",") {
				r.globals[e][strings.TrimSpace(n)] = true
			}
		}
	}
	if r.globals[d][name] {
		return -1
	}
	return d
}

// importName reads "X as Y" (alias Y) or "X" (alias X, or X's first
// component for a dotted import).
func importName(s string) (name, alias string) {
	s = strings.TrimSpace(s)
	if n, a, ok := strings.Cut(s, " as "); ok {
		return strings.TrimSpace(n), strings.TrimSpace(a)
	}
	return s, s
}

func isDotted(s string) bool {
	if s == "" {
		return false
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" || !isIdentStart(part[0]) {
			return false
		}
		for i := 0; i < len(part); i++ {
			if !isIdent(part[i]) {
				return false
			}
		}
	}
	return true
}

// aliases binds names assigned from a bound name (`_comm = comm`,
// `create = comm.create_workspace`), until nothing more is learnt.
func (r *useReader) aliases() {
	for range 4 {
		grew := false
		for i, l := range r.s.lines {
			lhs, rhs, ok := cutTop(l.text, '=')
			lhs, rhs = strings.TrimSpace(lhs), strings.TrimSpace(rhs)
			if !ok || !isDotted(lhs) || strings.Contains(lhs, ".") || !isDotted(rhs) {
				continue
			}
			head, rest, _ := strings.Cut(rhs, ".")
			if head == lhs {
				continue
			}
			p, ok := r.lookup(head, i)
			if !ok {
				continue
			}
			if rest != "" {
				p += "." + rest
			}
			k := bindKey{r.assignScope(lhs, i), lhs}
			if r.bind[k] != p {
				r.bind[k] = p
				grew = true
			}
		}
		if !grew {
			return
		}
	}
}

// scan finds every use of a bound name outside the imports: NAME, NAME.a.b,
// and calls of either, with their keyword arguments.
func (r *useReader) scan() {
	code := r.s.code
	for i := 0; i < len(code); {
		if !isIdentStart(code[i]) || i > 0 && (isIdent(code[i-1]) || code[i-1] == '.') {
			i++
			continue
		}
		j := i
		for j < len(code) && isIdent(code[j]) {
			j++
		}
		head := string(code[i:j])
		li := r.s.lineAt(i)
		if li < 0 {
			i = j
			continue
		}
		p, ok := r.lookup(head, li)
		if !ok {
			i = j
			continue
		}
		// The dotted chain after it.
		end := j
		for end+1 < len(code) && code[end] == '.' && isIdentStart(code[end+1]) {
			k := end + 1
			for k < len(code) && isIdent(code[k]) {
				k++
			}
			p += "." + string(code[end+1:k])
			end = k
		}
		if r.importLine[li] || r.skipped(i, j) {
			i = end
			continue
		}
		u := r.use(p, i)
		k := end
		for k < len(code) && (code[k] == ' ' || code[k] == '\t') {
			k++
		}
		if k < len(code) && code[k] == '(' {
			u.Calls++
			r.callArgs(u, k, li)
		}
		i = end
	}
}

// skipped reports whether the identifier at [i, j) is not a use: a def or class name, a keyword argument's name, or the target
// of an alias assignment.
func (r *useReader) skipped(i, j int) bool {
	code := r.s.code
	b := i - 1
	for b >= 0 && (code[b] == ' ' || code[b] == '\t') {
		b--
	}
	before := string(code[max(0, b-5) : b+1])
	if strings.HasSuffix(before, "def") || strings.HasSuffix(before, "class") {
		return true
	}
	a := j
	for a < len(code) && (code[a] == ' ' || code[a] == '\t' || code[a] == '\n') {
		a++
	}
	if a < len(code) && code[a] == '=' && !(a+1 < len(code) && code[a+1] == '=') {
		// NAME = ...: an assignment target (aliases() read it), or a
		// keyword argument's name.
		return true
	}
	return false
}

// callArgs reads the keyword arguments of the call whose '(' is at open.
func (r *useReader) callArgs(u *PyUse, open, li int) {
	end := parenEnd(r.s.code, open)
	if end < 0 {
		return
	}
	args := string(r.s.code[open+1 : end-1])
	for _, a := range splitTop(args) {
		a = strings.TrimSpace(a)
		switch {
		case strings.HasPrefix(a, "**"):
			name := strings.TrimSpace(a[2:])
			if !isDotted(name) || strings.Contains(name, ".") {
				u.Unread = append(u.Unread, "**"+name)
				continue
			}
			plain, guarded, ok := r.dictKeys(name, li)
			if !ok {
				u.Unread = append(u.Unread, "**"+name)
				continue
			}
			u.Kwargs = append(u.Kwargs, plain...)
			u.Guarded = append(u.Guarded, guarded...)
		case strings.HasPrefix(a, "*"):
		default:
			if k, _, ok := cutTop(a, '='); ok && isDotted(strings.TrimSpace(k)) && !strings.Contains(k, ".") {
				u.Kwargs = append(u.Kwargs, strings.TrimSpace(k))
			}
		}
	}
}

// dictKeys reads the keys of the dict name that a call on line li expands,
// from the lines of the same def before it: `name = dict(k=...)`, `name =
// {"k": ...}`, `name["k"] = ...`, `name.update(k=...)`. A key set on a line
// indented deeper than the dict's creation is guarded. It reports false
// when the dict is not made there.
func (r *useReader) dictKeys(name string, li int) (plain, guarded []string, ok bool) {
	s := r.s
	def := s.enclosingDef(li)
	// in reports whether line i is in the same def as the call (module
	// level: in no def).
	in := func(i int) bool {
		if def >= 0 {
			return i > def && s.inScope(i, def)
		}
		return s.enclosingDef(i) < 0
	}
	made := -1
	for i := li - 1; i >= 0 && (def < 0 || i > def) && li-i <= maxDictLines; i-- {
		if !in(i) {
			continue
		}
		lhs, rhs, isAssign := cutTop(s.lines[i].text, '=')
		if isAssign && strings.TrimSpace(lhs) == name {
			rhs = strings.TrimSpace(rhs)
			if strings.HasPrefix(rhs, "dict(") || strings.HasPrefix(rhs, "{") {
				made = i
			}
			break
		}
	}
	if made < 0 {
		return nil, nil, false
	}
	base := s.lines[made].indent
	for i := made; i < li; i++ {
		l := s.lines[i]
		if !in(i) {
			continue
		}
		var keys []string
		switch {
		case i == made:
			keys = r.literalKeys(l)
		case strings.HasPrefix(l.text, name+"[") || strings.HasPrefix(l.text, name+" ["):
			lhs, _, isAssign := cutTop(l.text, '=')
			if isAssign && strings.HasSuffix(strings.TrimSpace(lhs), "]") {
				if k, ok := r.stringAt(l, strings.Index(r.lineCode(l), "[")); ok {
					keys = []string{k}
				}
			}
		case strings.HasPrefix(l.text, name+".update("):
			keys = r.literalKeys(l)
		}
		if l.indent > base {
			guarded = append(guarded, keys...)
		} else {
			plain = append(plain, keys...)
		}
	}
	return plain, guarded, true
}

// maxDictLines bounds how far back from a call its **dict is looked for.
const maxDictLines = 400

// lineCode is line l's blanked code as in the file.
func (r *useReader) lineCode(l pyLine) string { return string(r.s.code[l.start:l.end]) }

// literalKeys reads k=... keywords of the first call on line l, or the
// string keys of its first {...} literal.
func (r *useReader) literalKeys(l pyLine) []string {
	code := r.lineCode(l)
	open := strings.IndexAny(code, "({")
	if open < 0 {
		return nil
	}
	end := parenEnd(r.s.code, l.start+open)
	if end < 0 {
		return nil
	}
	var keys []string
	inner := string(r.s.code[l.start+open+1 : end-1])
	at := l.start + open + 1
	for _, a := range splitTop(inner) {
		t := strings.TrimSpace(a)
		if code[open] == '(' {
			if k, _, ok := cutTop(t, '='); ok && isDotted(strings.TrimSpace(k)) && !strings.Contains(k, ".") {
				keys = append(keys, strings.TrimSpace(k))
			}
		} else if q := strings.IndexAny(a, `"'`); q >= 0 {
			if k, ok := r.quoted(at + q); ok {
				keys = append(keys, k)
			}
		}
		at += len(a) + 1
	}
	return keys
}

// stringAt reads the string literal that follows offset rel of line l.
func (r *useReader) stringAt(l pyLine, rel int) (string, bool) {
	if rel < 0 {
		return "", false
	}
	code := r.lineCode(l)
	q := strings.IndexAny(code[rel:], `"'`)
	if q < 0 {
		return "", false
	}
	return r.quoted(l.start + rel + q)
}

// quoted is the text of the one-line string literal whose opening quote is
// at offset q, when it is a plain identifier.
func (r *useReader) quoted(q int) (string, bool) {
	orig := r.s.orig
	if q >= len(orig) {
		return "", false
	}
	c := orig[q]
	e := q + 1
	for e < len(orig) && orig[e] != c && orig[e] != '\n' {
		e++
	}
	if e >= len(orig) || orig[e] != c {
		return "", false
	}
	k := string(orig[q+1 : e])
	if !isDotted(k) || strings.Contains(k, ".") {
		return "", false
	}
	return k, true
}

// sortedSet sorts ss and drops repeats.
func sortedSet(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	slices.Sort(ss)
	return slices.Compact(ss)
}

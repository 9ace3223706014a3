package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/internal/lazyre"
)

// ServerArgsFile is where sglang declares its launch flags.
const ServerArgsFile = "python/sglang/srt/server_args.py"

// FlagSpec is one launch flag as the tree's server_args.py declares it:
// its option strings, where argparse stores it, how many values it takes
// and its default when that is a static literal.
type FlagSpec struct {
	Names []string // "--tp-size", "--tensor-parallel-size"
	Dest  string   // the ServerArgs field ("tp_size")
	// Arity: 0 for a switch (store_true, store_const, a deprecated
	// switch), 1 for one value, -1 for one or more (nargs="+"), -2 for
	// any number (nargs="*"), -3 for an optional one (nargs="?").
	Arity int
	// Const is what a switch stores ("True" for store_true).
	Const string
	// Required: argparse refuses a launch without it.
	Required bool
	Line     int // the declaration's line in server_args.py
	// Type is "int" or "float" when argparse converts the value so (a
	// value it cannot convert ends the launch); "" otherwise.
	Type string
}

// Field is one ServerArgs dataclass field: its default when the default
// is a static literal (Static), and its line.
type Field struct {
	Name    string
	Default pyValue
	Static  bool
	Line    int
}

// ServerArgs is what doctor reads of one tree's server_args.py: the
// dataclass fields and every flag the parser gets.
type ServerArgs struct {
	Fields map[string]*Field
	Flags  []*FlagSpec
	byName map[string]*FlagSpec
}

var fieldRe = lazyre.New(`(?s)^([A-Za-z_][A-Za-z0-9_]*)\s*:(.*)$`)

// ParseServerArgs reads server_args.py: the fields of class ServerArgs
// (annotated fields of the auto-derived shape give their flags too) and
// the parser.add_argument calls of the rest of the file.
func ParseServerArgs(src []byte) (*ServerArgs, error) {
	lines := pyLines(string(src))
	sa := &ServerArgs{Fields: map[string]*Field{}, byName: map[string]*FlagSpec{}}
	in, body := false, -1
	for _, l := range lines {
		if !in {
			if strings.HasPrefix(l.Text, "class ServerArgs") && l.Indent == 0 {
				in = true
			}
			continue
		}
		if l.Indent == 0 {
			in = false
			continue
		}
		if body < 0 {
			body = l.Indent
		}
		if l.Indent != body {
			continue
		}
		m := fieldRe().FindStringSubmatch(l.Text)
		if m == nil || strings.HasPrefix(l.Text, "def ") {
			continue
		}
		rest := m[2]
		annot, def := rest, ""
		hasDefault := false
		if i := assignAt(rest); i >= 0 {
			annot, def, hasDefault = rest[:i], rest[i+1:], true
		}
		f := &Field{Name: m[1], Line: l.Line}
		if hasDefault {
			f.Default, f.Static = literal(def)
		}
		sa.Fields[f.Name] = f
		if spec := annotatedFlag(f.Name, strings.TrimSpace(annot)); spec != nil {
			spec.Line = l.Line
			// argparse requires a field without a default unless Arg says
			// required=False.
			spec.Required = !hasDefault && spec.Arity != 0 && !strings.Contains(annot, "required=False")
			sa.add(spec)
		}
	}
	if len(sa.Fields) == 0 {
		return nil, fmt.Errorf("%s: no class ServerArgs with fields", ServerArgsFile)
	}
	for _, l := range lines {
		i := strings.Index(l.Text, ".add_argument(")
		if i < 0 {
			continue
		}
		open := i + len(".add_argument")
		end := closeOf(l.Text, open)
		if end < 0 {
			continue
		}
		if spec := argparseFlag(sa, splitTop(l.Text[open+1:end], ',')); spec != nil {
			spec.Line = l.Line
			sa.add(spec)
		}
	}
	if len(sa.Flags) == 0 {
		return nil, fmt.Errorf("%s: no launch flags found (neither annotated fields nor parser.add_argument calls)", ServerArgsFile)
	}
	// from_cli_args copies some argparse dests onto their fields
	// (args.tp_size = args.tensor_parallel_size).
	for from, to := range cliRenames(lines) {
		for _, spec := range sa.Flags {
			if spec.Dest == from {
				spec.Dest = to
			}
		}
	}
	return sa, nil
}

var renameRe = lazyre.New(`^args\.([A-Za-z_][A-Za-z0-9_]*)\s*=\s*args\.([A-Za-z_][A-Za-z0-9_]*)$`)

// cliRenames are the args.FIELD = args.DEST lines of from_cli_args, as
// DEST → FIELD.
func cliRenames(lines []pyLine) map[string]string {
	out := map[string]string{}
	in, indent := false, 0
	for _, l := range lines {
		if strings.HasPrefix(l.Text, "def from_cli_args") {
			in, indent = true, l.Indent
			continue
		}
		if !in {
			continue
		}
		if l.Indent <= indent {
			break
		}
		if m := renameRe().FindStringSubmatch(l.Text); m != nil {
			out[m[2]] = m[1]
		}
	}
	return out
}

func (sa *ServerArgs) add(spec *FlagSpec) {
	for _, n := range spec.Names {
		if _, dup := sa.byName[n]; dup {
			return // argparse refuses a second one; the first is what runs
		}
	}
	sa.Flags = append(sa.Flags, spec)
	for _, n := range spec.Names {
		sa.byName[n] = spec
	}
}

// annotatedFlag is the flag an A[T, "help" | Arg(...), NS(...)] field
// gets from add_cli_args_from_dataclass, nil for a field without one.
func annotatedFlag(name, annot string) *FlagSpec {
	if !strings.HasPrefix(annot, "A[") || !strings.HasSuffix(annot, "]") || closeOf(annot, 1) != len(annot)-1 {
		return nil
	}
	parts := splitTop(annot[2:len(annot)-1], ',')
	if len(parts) < 2 {
		return nil
	}
	typ := parts[0]
	var kw map[string]string
	for _, p := range parts[1:] {
		if isQuote(p, 0) {
			if kw == nil {
				kw = map[string]string{}
			}
			break
		}
		if call, args, ok := callArgs(p); ok && call == "Arg" {
			kw = map[string]string{}
			for _, a := range args {
				if k, v, ok := kwarg(a); ok {
					kw[k] = v
				}
			}
			break
		}
	}
	if kw == nil {
		return nil // no Arg and no help string: no CLI from the field
	}
	if v, ok := literal(kw["no_cli"]); ok && len(v.Vals) == 1 && v.Vals[0] == "True" {
		return nil
	}

	cli := "--" + strings.ReplaceAll(name, "_", "-")
	if v, ok := literal(kw["cli_name"]); ok && len(v.Vals) == 1 {
		cli = v.Vals[0]
	}
	spec := &FlagSpec{Names: []string{cli}, Dest: name, Arity: 1}
	if v, ok := literal(kw["aliases"]); ok {
		spec.Names = append(spec.Names, v.Vals...)
	}
	inner := unwrapOptional(typ)
	switch {
	case kw["action"] != "":
		spec.Arity, spec.Const = actionArity(kw["action"], kw["nargs"])
	case strings.HasPrefix(inner, "Literal["):
	case (strings.HasPrefix(inner, "List[") || strings.HasPrefix(inner, "list[")) && kw["type_parser"] == "":
		spec.Arity = -1
		if n := nargsArity(kw["nargs"]); n != 0 {
			spec.Arity = n
		}
	case inner == "bool":
		spec.Arity, spec.Const = 0, "True"
	default:
		if n := nargsArity(kw["nargs"]); n != 0 {
			spec.Arity = n
		}
		if (inner == "int" || inner == "float") && kw["type_parser"] == "" && kw["type"] == "" {
			spec.Type = inner
		}
	}
	return spec
}

// unwrapOptional is X of Optional[X] (or X | None), else t.
func unwrapOptional(t string) string {
	t = strings.TrimSpace(t)
	if strings.HasPrefix(t, "Optional[") && strings.HasSuffix(t, "]") {
		return strings.TrimSpace(t[len("Optional[") : len(t)-1])
	}
	if parts := splitTop(t, '|'); len(parts) == 2 && parts[1] == "None" {
		return parts[0]
	}
	return t
}

// argparseFlag is the flag of one parser.add_argument(...) call.
func argparseFlag(sa *ServerArgs, args []string) *FlagSpec {
	spec := &FlagSpec{Arity: 1}
	kw := map[string]string{}
	for _, a := range args {
		if k, v, ok := kwarg(a); ok {
			kw[k] = v
			continue
		}
		v, ok := literal(a)
		if !ok || len(v.Vals) != 1 || !strings.HasPrefix(v.Vals[0], "-") {
			if strings.HasPrefix(a, "*") {
				return nil // add_argument(*names, **kwargs): the dataclass helper
			}
			continue
		}
		spec.Names = append(spec.Names, v.Vals[0])
	}
	if len(spec.Names) == 0 {
		return nil
	}
	if v, ok := literal(kw["dest"]); ok && len(v.Vals) == 1 {
		spec.Dest = v.Vals[0]
	} else {
		spec.Dest = argparseDest(spec.Names)
	}
	if kw["action"] != "" {
		spec.Arity, spec.Const = actionArity(kw["action"], kw["nargs"])
	} else if n := nargsArity(kw["nargs"]); n != 0 {
		spec.Arity = n
	}
	if t := strings.TrimSpace(kw["type"]); t == "int" || t == "float" {
		spec.Type = t
	}
	if v, ok := literal(kw["required"]); ok && len(v.Vals) == 1 && v.Vals[0] == "True" {
		spec.Required = true
	}
	if f := sa.Fields[spec.Dest]; f == nil {
		// A flag whose dest is no field: its default is the call's own.
		if v, ok := literal(kw["default"]); ok {
			sa.Fields[spec.Dest] = &Field{Name: spec.Dest, Default: v, Static: true}
		}
	}
	return spec
}

// argparseDest is the dest argparse derives: the first long option, its
// dashes turned into underscores.
func argparseDest(names []string) string {
	for _, n := range names {
		if strings.HasPrefix(n, "--") {
			return strings.ReplaceAll(strings.TrimPrefix(n, "--"), "-", "_")
		}
	}
	return strings.ReplaceAll(strings.TrimLeft(names[0], "-"), "-", "_")
}

// actionArity is how many values a flag with this action takes, and what
// a switch stores.
func actionArity(action, nargs string) (int, string) {
	if n := nargsArity(nargs); n != 0 {
		return n, ""
	}
	a := action
	if v, ok := literal(action); ok && len(v.Vals) == 1 {
		a = v.Vals[0]
	}
	switch {
	case a == "store_true":
		return 0, "True"
	case a == "store_false":
		return 0, "False"
	case a == "store_const", a == "count", a == "help", a == "version":
		return 0, ""
	case strings.HasSuffix(a, "StoreTrueAction"):
		return 0, "True"
	case strings.HasSuffix(a, "StoreConstAction"), a == "DeprecatedAction", strings.HasSuffix(a, ".DeprecatedAction"):
		return 0, ""
	}
	return 1, ""
}

func nargsArity(nargs string) int {
	v, ok := literal(nargs)
	if !ok || len(v.Vals) != 1 {
		return 0
	}
	switch v.Vals[0] {
	case "+":
		return -1
	case "*":
		return -2
	case "?":
		return -3
	case "0":
		return 0
	}
	return 1
}

// Lookup finds the flag an option string names as argparse does: the
// exact name, else the one long option it is a unique prefix of.
// Ambiguous lists the candidates when it prefixes several.
func (sa *ServerArgs) Lookup(opt string) (spec *FlagSpec, ambiguous []string) {
	if s := sa.byName[opt]; s != nil {
		return s, nil
	}
	if !strings.HasPrefix(opt, "--") || len(opt) < 3 {
		return nil, nil
	}
	var hits []string
	for n := range sa.byName {
		if strings.HasPrefix(n, opt) {
			hits = append(hits, n)
		}
	}
	sort.Strings(hits)
	switch {
	case len(hits) == 1:
		return sa.byName[hits[0]], nil
	case len(hits) > 1:
		return nil, hits
	}
	return nil, nil
}

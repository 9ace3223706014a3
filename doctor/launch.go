package doctor

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/smpatch/smpatch/internal/lazyre"
)

// Launch is a server command line: the environment it sets before the
// program, how sglang is entered, and the server's own arguments.
type Launch struct {
	Argv  []string          // as given
	Env   map[string]string // NAME=VALUE words before the program
	Entry string            // "python -m sglang.launch_server", "sglang serve"
	Args  []string          // what sglang's parser gets
}

var (
	envWordRe = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*=`)
	pythonRe  = lazyre.New(`^python(\d+(\.\d+)?)?$`)
)

// ParseLaunch reads a launch command line: NAME=VALUE words (and env),
// then `python -m sglang.launch_server ARGS`, `python -m sglang.cli.main
// serve ARGS` or `sglang serve [MODEL] ARGS`. Anything else is not an
// sglang launch (*NotSGLangError).
func ParseLaunch(argv []string) (*Launch, error) {
	l := &Launch{Argv: argv, Env: map[string]string{}}
	i := 0
	if i < len(argv) && filepath.Base(argv[i]) == "env" {
		i++
		for i < len(argv) && strings.HasPrefix(argv[i], "-") {
			i++ // env's own options (-i, -u NAME is rare in launches)
		}
	}
	for i < len(argv) && envWordRe().MatchString(argv[i]) {
		k, v, _ := strings.Cut(argv[i], "=")
		l.Env[k] = v
		i++
	}
	if i >= len(argv) {
		return nil, &NotSGLangError{Argv: argv, Why: "no program after the environment"}
	}
	prog := filepath.Base(argv[i])
	rest := argv[i+1:]
	switch {
	case pythonRe().MatchString(prog):
		mod, after, err := pythonModule(rest)
		if err != nil {
			return nil, &NotSGLangError{Argv: argv, Why: err.Error()}
		}
		switch mod {
		case "sglang.launch_server":
			l.Entry, l.Args = prog+" -m sglang.launch_server", after
		case "sglang.cli.main", "sglang":
			if len(after) == 0 || after[0] != "serve" {
				return nil, &NotSGLangError{Argv: argv, Why: prog + " -m " + mod + " without serve"}
			}
			l.Entry, l.Args = prog+" -m "+mod+" serve", serveArgs(after[1:])
		default:
			return nil, &NotSGLangError{Argv: argv, Why: fmt.Sprintf("module %s is not sglang's server (sglang.launch_server)", mod)}
		}
	case prog == "sglang":
		if len(rest) == 0 || rest[0] != "serve" {
			return nil, &NotSGLangError{Argv: argv, Why: "sglang without serve"}
		}
		l.Entry, l.Args = "sglang serve", serveArgs(rest[1:])
	default:
		return nil, &NotSGLangError{Argv: argv, Why: fmt.Sprintf("%s is neither python -m sglang.launch_server nor sglang serve", prog)}
	}
	return l, nil
}

// pythonModule skips the interpreter's options up to -m MODULE.
func pythonModule(args []string) (string, []string, error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-m":
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("-m without a module")
			}
			return args[i+1], args[i+2:], nil
		case strings.HasPrefix(a, "-m") && len(a) > 2:
			return a[2:], args[i+1:], nil
		case a == "-X" || a == "-W":
			i++
		case strings.HasPrefix(a, "-") && a != "-" && a != "-c":
		default:
			return "", nil, fmt.Errorf("python runs %q, not a module", a)
		}
	}
	return "", nil, fmt.Errorf("python without -m")
}

// serveArgs is what `sglang serve` hands sglang's parser: --model-type
// taken out, a leading model path turned into --model-path.
func serveArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--model-type" {
			i++
			continue
		}
		if strings.HasPrefix(a, "--model-type=") {
			continue
		}
		out = append(out, a)
	}
	if len(out) > 0 && !strings.HasPrefix(out[0], "-") {
		out = append([]string{"--model-path"}, out...)
	}
	return out
}

// Parsed is a launch's arguments read against a tree's flags.
type Parsed struct {
	// Given maps a ServerArgs field to the values the launch gave it (the
	// last occurrence wins) and As to the option it was given with.
	Given  map[string][]string
	As     map[string]string
	Switch map[string]bool // given as a switch (no value of its own)
	// Problems are what argparse would refuse, one line each.
	Problems []string
	// Config is the --config file, whose settings are not read.
	Config string
}

// Parse reads args as that tree's parser would: long options with a
// value after = or in the next word, switches, nargs lists, and the
// unique prefixes argparse accepts.
func (sa *ServerArgs) Parse(args []string) *Parsed {
	p := &Parsed{Given: map[string][]string{}, As: map[string]string{}, Switch: map[string]bool{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			p.Problems = append(p.Problems, fmt.Sprintf("unrecognized arguments: %s", a))
			continue
		}
		if a == "--" {
			continue
		}
		opt, val, hasVal := strings.Cut(a, "=")
		if opt == "--config" {
			if !hasVal && i+1 < len(args) {
				i++
				val = args[i]
			}
			p.Config = val
			continue
		}
		spec, amb := sa.Lookup(opt)
		if len(amb) > 0 {
			p.Problems = append(p.Problems, fmt.Sprintf("ambiguous option: %s could match %s", opt, strings.Join(amb, ", ")))
			continue
		}
		if spec == nil {
			p.Problems = append(p.Problems, fmt.Sprintf("unrecognized arguments: %s", opt))
			continue
		}
		var vals []string
		switch spec.Arity {
		case 0:
			if hasVal {
				p.Problems = append(p.Problems, fmt.Sprintf("argument %s: ignored explicit argument '%s'", opt, val))
				continue
			}
			vals = []string{spec.Const}
			if spec.Const == "" {
				vals = []string{"given"}
			}
		case 1:
			switch {
			case hasVal:
				vals = []string{val}
			case i+1 < len(args) && !isOption(args[i+1]):
				i++
				vals = []string{args[i]}
			default:
				p.Problems = append(p.Problems, fmt.Sprintf("argument %s: expected one argument", strings.Join(spec.Names, "/")))
				continue
			}
			if !convertible(spec.Type, vals[0]) {
				p.Problems = append(p.Problems, fmt.Sprintf("argument %s: invalid %s value: '%s'", strings.Join(spec.Names, "/"), spec.Type, vals[0]))
				continue
			}
		default:
			if hasVal {
				vals = append(vals, val)
			}
			for i+1 < len(args) && !isOption(args[i+1]) && !(spec.Arity == -3 && len(vals) == 1) {
				i++
				vals = append(vals, args[i])
			}
			if spec.Arity == -1 && len(vals) == 0 {
				p.Problems = append(p.Problems, fmt.Sprintf("argument %s: expected at least one argument", strings.Join(spec.Names, "/")))
				continue
			}
		}
		p.Given[spec.Dest] = vals
		p.As[spec.Dest] = opt
		p.Switch[spec.Dest] = spec.Arity == 0
	}
	return p
}

// isOption is argparse's test for a word that starts an option rather
// than being a value: a dash and not a negative number.
func isOption(s string) bool {
	if !strings.HasPrefix(s, "-") || s == "-" {
		return false
	}
	if _, ok := pyNumber(s); ok {
		return false
	}
	return true
}

// missingRequired are argparse's refusals of a launch without a required
// flag.
func (sa *ServerArgs) missingRequired(p *Parsed) []string {
	var out []string
	for _, s := range sa.Flags {
		if s.Required && p.Given[s.Dest] == nil {
			out = append(out, "the following arguments are required: "+strings.Join(s.Names, "/"))
		}
	}
	return out
}

// pyInt is what Python's int() takes from a string: digits with single
// underscores between them, a sign, spaces around.
var pyInt = regexp.MustCompile(`^\s*[+-]?[0-9]+(_[0-9]+)*\s*$`)

// convertible reports whether argparse's type (int, float; "" for none)
// takes v.
func convertible(typ, v string) bool {
	switch typ {
	case "int":
		return pyInt.MatchString(v)
	case "float":
		t := strings.TrimSpace(v)
		if pyInt.MatchString(t) {
			return true
		}
		_, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
		return err == nil || errors.Is(err, strconv.ErrRange)
	}
	return true
}

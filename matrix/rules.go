package matrix

import (
	_ "embed"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/tomlfile"
	"github.com/smpatch/smpatch/source"
)

// RulesVersion is the rules file format this package reads.
const RulesVersion = 1

//go:embed rules/default.toml
var defaultRules []byte

// DefaultRulesName names the built-in rules file in messages.
const DefaultRulesName = "builtin:matrix/rules/default.toml"

// Rule prunes, warns about or fixes cells that match its condition.
type Rule struct {
	Name   string `json:"name"`
	Action string `json:"action"` // prune, warn, require-flag
	Flag   string `json:"flag,omitempty"`
	Reason string `json:"reason"`
	Source string `json:"source"`
	Where  string `json:"where"` // file:line
	// NeedsProbe is set when the condition reads probe facts: without
	// --probe-file the rule cannot match and the expansion says so.
	NeedsProbe bool `json:"needs_probe,omitempty"`

	when cond
	file string // the rules file, for messages about its conditions
}

type cond struct {
	axis         []axisCond
	env          []namedCond // variable -> wanted values
	flags        []string
	noFlags      []string
	flagValues   []namedCond // flag -> wanted values
	patches      []string
	patchesLine  int // line of when.patches in the rules file
	cudaGraphs   *bool
	smMajor      []int
	probeVerdict []namedCond // module -> wanted verdicts
	varies       []string
	tp           []int
	tpOutside    []int // matches a cell whose TP is not one of these ([requires.PATCH] tp)
	nvlink, p2p  *bool
	versions     []versionCond // package -> PEP 440 constraint, read from the probe report
	envEmpty     []string      // variables set to the empty string

	needFlags bool
}

type versionCond struct {
	pkg  string // "nccl", "torch"
	text string
	cs   version.Constraints
}

type axisCond struct {
	ai   int
	keys []string // value keys
}

type namedCond struct {
	name string
	want []string
}

type rulesFile struct {
	Version int64      `toml:"version"`
	Rule    []fileRule `toml:"rule"`
}

type fileRule struct {
	Name   string         `toml:"name"`
	Action string         `toml:"action"`
	Flag   string         `toml:"flag"`
	Reason string         `toml:"reason"`
	Source string         `toml:"source"`
	When   map[string]any `toml:"when"`
}

// conditionKeys are the keys a rule's [rule.when] table may use.
var conditionKeys = []string{"axis", "cuda_graphs", "env", "env_empty", "flag_values", "flags", "nccl_version", "no_flags", "nvlink", "p2p", "patches", "probe_verdict", "sm_major", "torch_version", "tp", "varies"}

// LoadRules reads a rules file; axis names in conditions are checked
// against m.
func LoadRules(file string, m *Matrix) ([]*Rule, error) {
	data, err := tomlfile.ReadFile(nil, file)
	if err != nil {
		return nil, err
	}
	return ParseRules(file, data, m)
}

// DefaultRules returns the rules shipped with smpatch.
func DefaultRules(m *Matrix) ([]*Rule, error) {
	return ParseRules(DefaultRulesName, defaultRules, m)
}

// maxRuleText bounds a rule's name, reason and source.
const maxRuleText = 2048

// MaxRules bounds the rules of one expansion (the built-in ones, the
// matrix's rules files and the user's, together) and of one file: each is
// tried on every cell, and 20,000 rules over 64,000 cells once took four
// minutes.
const MaxRules = 1024

// ParseRules parses rules file bytes.
func ParseRules(file string, data []byte, m *Matrix) ([]*Rule, error) {
	var rf rulesFile
	md, err := tomlfile.Decode(file, data, &rf)
	if err != nil {
		return nil, err
	}
	li := tomlfile.IndexLines(data)
	lineOf := func(k ...string) int { return li.Line(k) }
	errf := func(line int, format string, args ...any) error {
		if line > 0 {
			return fmt.Errorf("%s:%d: %s", file, line, fmt.Sprintf(format, args...))
		}
		return fmt.Errorf("%s: %s", file, fmt.Sprintf(format, args...))
	}
	if k := caseMismatch(md, reflect.TypeOf(rf)); k != nil {
		return nil, errf(li.Line(k), "unknown key %q (keys are lower case)", k.String())
	}
	if err := tomlfile.UnknownError(file, md, [][]string{{"rule", "when"}}, li.Line); err != nil {
		return nil, err
	}
	if !md.IsDefined("version") {
		return nil, errf(1, "version is missing: a rules file starts with version = %d", RulesVersion)
	}
	if rf.Version != RulesVersion {
		return nil, errf(lineOf("version"), "rules version %d is not supported (this smpatch reads version %d)", rf.Version, RulesVersion)
	}
	if len(rf.Rule) > MaxRules {
		return nil, errf(lineOf("rule", strconv.Itoa(MaxRules)), "more than %d rules in one file (each is tried on every cell)", MaxRules)
	}
	var out []*Rule
	names := map[string]bool{}
	for i, fr := range rf.Rule {
		idx := strconv.Itoa(i)
		line := lineOf("rule", idx)
		r := &Rule{Name: fr.Name, Action: fr.Action, Flag: fr.Flag, Reason: fr.Reason, Source: fr.Source,
			Where: fmt.Sprintf("%s:%d", file, line), file: file}
		if r.Name == "" || slug(r.Name) != r.Name {
			return nil, errf(line, "rule[%d]: name %q must be non-empty [a-z0-9.-]", i, r.Name)
		}
		if names[r.Name] {
			return nil, errf(line, "rule %q is defined twice", r.Name)
		}
		names[r.Name] = true
		switch r.Action {
		case "prune", "warn":
			if r.Flag != "" {
				return nil, errf(lineOf("rule", idx, "flag"), "rule %q: flag is only for action require-flag", r.Name)
			}
		case "require-flag":
			if !flagKeyRe().MatchString(r.Flag) {
				return nil, errf(lineOf("rule", idx, "flag"), "rule %q: require-flag needs flag = \"--name\"", r.Name)
			}
		default:
			return nil, errf(lineOf("rule", idx, "action"), "rule %q: action %q is not prune, warn or require-flag", r.Name, r.Action)
		}
		if r.Reason == "" {
			return nil, errf(line, "rule %q: reason is missing", r.Name)
		}
		if r.Source == "" {
			return nil, errf(line, "rule %q: source is missing (a link to where the fact comes from)", r.Name)
		}
		// A rule's text goes into every cell it matches (run.sh, index.json,
		// SUMMARY.md): bounded, and one line each.
		for _, f := range []struct{ key, v string }{{"name", r.Name}, {"reason", r.Reason}, {"source", r.Source}} {
			if len(f.v) > maxRuleText {
				return nil, errf(lineOf("rule", idx, f.key), "rule %q: %s of %d bytes, more than %d", shortText(r.Name), f.key, len(f.v), maxRuleText)
			}
			if hasControl(f.v) {
				return nil, errf(lineOf("rule", idx, f.key), "rule %q: %s %q holds a control character", shortText(r.Name), f.key, shortText(f.v))
			}
		}
		c, err := parseCond(fr.When, m, func(key string) int { return lineOf("rule", idx, "when", key) })
		if err != nil {
			l := lineOf("rule", idx, "when")
			var ce condErr
			if asCondErr(err, &ce) {
				l = ce.line
				err = ce.err
			}
			return nil, errf(l, "rule %q: %v", r.Name, err)
		}
		r.when = c
		r.NeedsProbe = len(c.probeVerdict) > 0 || c.nvlink != nil || c.p2p != nil || len(c.versions) > 0
		out = append(out, r)
	}
	return out, nil
}

type condErr struct {
	line int
	err  error
}

func (c condErr) Error() string { return c.err.Error() }

func asCondErr(err error, ce *condErr) bool {
	c, ok := err.(condErr)
	if ok {
		*ce = c
	}
	return ok
}

func parseCond(w map[string]any, m *Matrix, line func(string) int) (cond, error) {
	var c cond
	if len(w) == 0 {
		return c, fmt.Errorf("[rule.when] is missing or empty: a rule must say which cells it is about")
	}
	for _, k := range sortedKeys(w) {
		if err := c.parseKey(k, w[k], m); err != nil {
			return c, condErr{line(k), err}
		}
		if k == "patches" {
			c.patchesLine = line(k)
		}
	}
	return c, nil
}

// parseKey reads condition k of a [rule.when] into c.
func (c *cond) parseKey(k string, x any, m *Matrix) error {
	switch k {
	case "axis":
		return c.parseAxis(x, m)
	case "env":
		nc, err := namedConds(x, "when.env", "a table of NAME = value(s)")
		c.env = nc
		return err
	case "flags", "no_flags", "varies", "patches", "env_empty":
		vs, err := stringsOf(x)
		if err != nil {
			return fmt.Errorf("when.%s: %v", k, err)
		}
		switch k {
		case "flags":
			c.flags, c.needFlags = vs, true
		case "no_flags":
			c.noFlags, c.needFlags = vs, true
		case "varies":
			c.varies = vs
		case "patches":
			c.patches = vs
		case "env_empty":
			c.envEmpty = vs
		}
	case "flag_values":
		nc, err := namedConds(x, "when.flag_values", "a table of \"--flag\" = value(s)")
		c.flagValues, c.needFlags = nc, true
		return err
	case "cuda_graphs":
		b, ok := x.(bool)
		if !ok {
			return errors.New("when.cuda_graphs: want true or false")
		}
		c.cudaGraphs, c.needFlags = &b, true
	case "sm_major":
		ns, ok := intsOf(x, 1, 99)
		if !ok {
			return errors.New("when.sm_major: want GPU major versions like 12 or [9, 10]")
		}
		c.smMajor = ns
	case "probe_verdict":
		return c.parseProbeVerdict(x)
	case "tp":
		ns, ok := intsOf(x, 1, 1024)
		if !ok {
			return errors.New("when.tp: want tensor-parallel sizes like 2 or [4, 8]")
		}
		c.tp = ns
	case "nvlink", "p2p":
		b, ok := x.(bool)
		if !ok {
			return fmt.Errorf("when.%s: want true or false", k)
		}
		if k == "nvlink" {
			c.nvlink = &b
		} else {
			c.p2p = &b
		}
	case "nccl_version", "torch_version":
		t, ok := x.(string)
		if !ok {
			return fmt.Errorf("when.%s: want a version range like \">= 2.26.2, < 2.31.2\"", k)
		}
		cs, err := source.ParseConstraints(t)
		if err != nil {
			return fmt.Errorf("when.%s: %v", k, err)
		}
		c.versions = append(c.versions, versionCond{pkg: strings.TrimSuffix(k, "_version"), text: t, cs: cs})
	default:
		return fmt.Errorf("when: unknown condition %q (known: %s)", k, strings.Join(conditionKeys, ", "))
	}
	return nil
}

// parseAxis reads when.axis: a table of axis = value(s).
func (c *cond) parseAxis(x any, m *Matrix) error {
	t, ok := x.(map[string]any)
	if !ok {
		return errors.New("when.axis: want a table of axis = value(s)")
	}
	for _, name := range sortedKeys(t) {
		ai, ok := m.axis[name]
		if !ok {
			return fmt.Errorf("when.axis: unknown axis %q%s", name, m.axisHint())
		}
		vals, err := matchValues(name, t[name])
		if err != nil {
			return fmt.Errorf("when.axis.%s: %v", name, err)
		}
		ac := axisCond{ai: ai}
		for _, v := range vals {
			ac.keys = append(ac.keys, v.key())
		}
		c.axis = append(c.axis, ac)
	}
	return nil
}

// parseProbeVerdict reads when.probe_verdict: a table of module =
// verdict(s).
func (c *cond) parseProbeVerdict(x any) error {
	nc, err := namedConds(x, "when.probe_verdict", "a table of module = verdict(s)")
	if err != nil {
		return err
	}
	for _, n := range nc {
		for _, v := range n.want {
			switch v {
			case "supported", "unsupported-gate", "unsupported-header", "unknown":
			default:
				return fmt.Errorf("when.probe_verdict.%s: %q is not supported, unsupported-gate, unsupported-header or unknown", n.name, v)
			}
		}
	}
	c.probeVerdict = nc
	return nil
}

// namedConds reads a table of name = value(s) (what names it in errors,
// want what it should be).
func namedConds(x any, what, want string) ([]namedCond, error) {
	t, ok := x.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: want %s", what, want)
	}
	var out []namedCond
	for _, name := range sortedKeys(t) {
		vs, err := stringsOf(t[name])
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %v", what, name, err)
		}
		out = append(out, namedCond{name, vs})
	}
	return out, nil
}

// intsOf reads an integer or a list of them, each from lo to hi.
func intsOf(x any, lo, hi int64) ([]int, bool) {
	l, isList := x.([]any)
	if !isList {
		l = []any{x}
	}
	var out []int
	for _, e := range l {
		n, ok := e.(int64)
		if !ok || n < lo || n > hi {
			return nil, false
		}
		out = append(out, int(n))
	}
	return out, true
}

func stringsOf(x any) ([]string, error) {
	l, isList := x.([]any)
	if !isList {
		l = []any{x}
	}
	if len(l) == 0 {
		return nil, fmt.Errorf("an empty list matches nothing")
	}
	var out []string
	for _, e := range l {
		v, err := toValue("", e)
		if err != nil {
			return nil, err
		}
		out = append(out, v.Text)
	}
	return out, nil
}

package matrix

import (
	_ "embed"
	"fmt"
	"os"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/smpatch/smpatch/probe"
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
}

type cond struct {
	axis         []axisCond
	env          []namedCond // variable -> wanted values
	flags        []string
	noFlags      []string
	flagValues   []namedCond // flag -> wanted values
	patches      []string
	cudaGraphs   *bool
	smMajor      []int
	probeVerdict []namedCond // module -> wanted verdicts
	varies       []string

	needFlags bool
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
var conditionKeys = []string{"axis", "cuda_graphs", "env", "flag_values", "flags", "no_flags", "patches", "probe_verdict", "sm_major", "varies"}

// LoadRules reads a rules file; axis names in conditions are checked
// against m.
func LoadRules(file string, m *Matrix) ([]*Rule, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return ParseRules(file, data, m)
}

// DefaultRules returns the rules shipped with smpatch.
func DefaultRules(m *Matrix) ([]*Rule, error) {
	return ParseRules(DefaultRulesName, defaultRules, m)
}

// ParseRules parses rules file bytes.
func ParseRules(file string, data []byte, m *Matrix) ([]*Rule, error) {
	var rf rulesFile
	md, err := toml.Decode(string(data), &rf)
	if err != nil {
		return nil, tomlError(file, err)
	}
	li := indexLines(string(data))
	errf := func(line int, format string, args ...any) error {
		if line > 0 {
			return fmt.Errorf("%s:%d: %s", file, line, fmt.Sprintf(format, args...))
		}
		return fmt.Errorf("%s: %s", file, fmt.Sprintf(format, args...))
	}
	if k := caseMismatch(md, reflect.TypeOf(rf)); k != nil {
		return nil, errf(li.line(k...), "unknown key %q (keys are lower case)", k.String())
	}
	if k := firstUndecoded(md, [][]string{{"rule", "when"}}); k != nil {
		return nil, errf(li.line(k...), "unknown key %q", k.String())
	}
	if rf.Version != RulesVersion {
		return nil, errf(li.line("version"), "rules version %d is not supported (this smpatch reads version %d)", rf.Version, RulesVersion)
	}
	var out []*Rule
	names := map[string]bool{}
	for i, fr := range rf.Rule {
		idx := strconv.Itoa(i)
		line := li.line("rule", idx)
		r := &Rule{Name: fr.Name, Action: fr.Action, Flag: fr.Flag, Reason: fr.Reason, Source: fr.Source,
			Where: fmt.Sprintf("%s:%d", file, line)}
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
				return nil, errf(li.line("rule", idx, "flag"), "rule %q: flag is only for action require-flag", r.Name)
			}
		case "require-flag":
			if !flagKeyRe.MatchString(r.Flag) {
				return nil, errf(li.line("rule", idx, "flag"), "rule %q: require-flag needs flag = \"--name\"", r.Name)
			}
		default:
			return nil, errf(li.line("rule", idx, "action"), "rule %q: action %q is not prune, warn or require-flag", r.Name, r.Action)
		}
		if r.Reason == "" {
			return nil, errf(line, "rule %q: reason is missing", r.Name)
		}
		if r.Source == "" {
			return nil, errf(line, "rule %q: source is missing (a link to where the fact comes from)", r.Name)
		}
		c, err := parseCond(fr.When, m, func(key string) int { return li.line("rule", idx, "when", key) })
		if err != nil {
			l := li.line("rule", idx, "when")
			var ce condErr
			if asCondErr(err, &ce) {
				l = ce.line
				err = ce.err
			}
			return nil, errf(l, "rule %q: %v", r.Name, err)
		}
		r.when = c
		r.NeedsProbe = len(c.probeVerdict) > 0
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
	fail := func(key string, format string, args ...any) error {
		return condErr{line(key), fmt.Errorf(format, args...)}
	}
	for _, k := range sortedKeys(w) {
		x := w[k]
		switch k {
		case "axis":
			t, ok := x.(map[string]any)
			if !ok {
				return c, fail(k, "when.axis: want a table of axis = value(s)")
			}
			for _, name := range sortedKeys(t) {
				ai, ok := m.axis[name]
				if !ok {
					return c, fail(k, "when.axis: unknown axis %q%s", name, m.axisHint())
				}
				vals, err := matchValues(name, t[name])
				if err != nil {
					return c, fail(k, "when.axis.%s: %v", name, err)
				}
				ac := axisCond{ai: ai}
				for _, v := range vals {
					ac.keys = append(ac.keys, v.key())
				}
				c.axis = append(c.axis, ac)
			}
		case "env":
			t, ok := x.(map[string]any)
			if !ok {
				return c, fail(k, "when.env: want a table of NAME = value(s)")
			}
			for _, name := range sortedKeys(t) {
				vs, err := stringsOf(t[name])
				if err != nil {
					return c, fail(k, "when.env.%s: %v", name, err)
				}
				c.env = append(c.env, namedCond{name, vs})
			}
		case "flags", "no_flags", "varies", "patches":
			vs, err := stringsOf(x)
			if err != nil {
				return c, fail(k, "when.%s: %v", k, err)
			}
			switch k {
			case "flags":
				c.flags = vs
				c.needFlags = true
			case "no_flags":
				c.noFlags = vs
				c.needFlags = true
			case "varies":
				c.varies = vs
			case "patches":
				c.patches = vs
			}
		case "flag_values":
			t, ok := x.(map[string]any)
			if !ok {
				return c, fail(k, "when.flag_values: want a table of \"--flag\" = value(s)")
			}
			for _, f := range sortedKeys(t) {
				vs, err := stringsOf(t[f])
				if err != nil {
					return c, fail(k, "when.flag_values.%s: %v", f, err)
				}
				c.flagValues = append(c.flagValues, namedCond{f, vs})
			}
			c.needFlags = true
		case "cuda_graphs":
			b, ok := x.(bool)
			if !ok {
				return c, fail(k, "when.cuda_graphs: want true or false")
			}
			c.cudaGraphs = &b
			c.needFlags = true
		case "sm_major":
			l, isList := x.([]any)
			if !isList {
				l = []any{x}
			}
			for _, e := range l {
				n, ok := e.(int64)
				if !ok || n <= 0 || n > 99 {
					return c, fail(k, "when.sm_major: want GPU major versions like 12 or [9, 10]")
				}
				c.smMajor = append(c.smMajor, int(n))
			}
		case "probe_verdict":
			t, ok := x.(map[string]any)
			if !ok {
				return c, fail(k, "when.probe_verdict: want a table of module = verdict(s)")
			}
			for _, mod := range sortedKeys(t) {
				vs, err := stringsOf(t[mod])
				if err != nil {
					return c, fail(k, "when.probe_verdict.%s: %v", mod, err)
				}
				for _, v := range vs {
					switch v {
					case "supported", "unsupported-gate", "unsupported-header", "unknown":
					default:
						return c, fail(k, "when.probe_verdict.%s: %q is not supported, unsupported-gate, unsupported-header or unknown", mod, v)
					}
				}
				c.probeVerdict = append(c.probeVerdict, namedCond{mod, vs})
			}
		default:
			return c, fail(k, "when: unknown condition %q (known: %s)", k, strings.Join(conditionKeys, ", "))
		}
	}
	return c, nil
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

// ProbeFacts are the parts of a probe report (smpatch probe --json) that
// rules read: the visible GPUs and the flashinfer module verdicts.
type ProbeFacts struct {
	File string
	// SMs are the compute capabilities of the visible GPUs ("12.0").
	SMs []string
	// Verdicts maps a flashinfer module and a GPU major ("12") to its
	// verdict: supported, unsupported-gate, unsupported-header or unknown.
	Verdicts map[string]map[string]string
	// FlashInfer is the report's static analysis of flashinfer, used to
	// judge a major the probed host did not have (an SM120 cell probed on
	// an H200 build host).
	FlashInfer *probe.FlashInfer
}

// verdict is the verdict for a module on a GPU major: the report's, else
// judged from the report's flashinfer analysis, else unknown.
func (f *ProbeFacts) verdict(module string, major int) string {
	if v := f.Verdicts[module][strconv.Itoa(major)]; v != "" {
		return v
	}
	if f.FlashInfer != nil {
		if v := probe.ModuleVerdict(f.FlashInfer, module, major); v != nil && v.Verdict != "" {
			return v.Verdict
		}
	}
	return probe.Unknown
}

// ReadProbeFacts reads a probe report written by smpatch probe --json -o FILE.
func ReadProbeFacts(file string) (*ProbeFacts, error) {
	r, err := probe.ReadReport(file)
	if err != nil {
		return nil, err
	}
	f := FactsFromReport(r)
	f.File = file
	return f, nil
}

// FactsFromReport takes from a probe report what rules read.
func FactsFromReport(r *probe.Report) *ProbeFacts {
	f := &ProbeFacts{Verdicts: map[string]map[string]string{}, FlashInfer: r.FlashInfer}
	if r.Host != nil {
		for _, g := range r.Host.GPUs {
			if g.SM != "" {
				f.SMs = append(f.SMs, g.SM)
			}
		}
	}
	for mod, per := range r.Verdicts {
		f.Verdicts[mod] = map[string]string{}
		for major, v := range per {
			s := probe.Unknown
			if v != nil && v.Verdict != "" {
				s = v.Verdict
			}
			f.Verdicts[mod][strings.TrimSuffix(major, ".0")] = s
		}
	}
	return f
}

// majors returns the distinct GPU majors of the probed host.
func (f *ProbeFacts) majors() []int {
	var out []int
	for _, s := range f.SMs {
		if maj, _, err := parseSM(s); err == nil && !slices.Contains(out, maj) {
			out = append(out, maj)
		}
	}
	return out
}

// flagTable numbers the flags rules ask about, so that each cell's command
// is read once into a slice instead of a map.
type flagTable struct {
	idx map[string]int
}

func (ft *flagTable) add(f string) int {
	if i, ok := ft.idx[f]; ok {
		return i
	}
	ft.idx[f] = len(ft.idx)
	return ft.idx[f]
}

// ruleEval is a rule prepared for one expansion: axis conditions as
// lookups by value index, flags as flag table indexes.
type ruleEval struct {
	*Rule
	axisOK   [][]bool
	flags    []int
	noFlags  []int
	flagVals []int
	flag     int
	varies   bool
	// unprobed counts the cells that matched every condition but the probe
	// facts, when no probe report was given; first is the first of them.
	unprobed int
	first    string
}

const cudaGraphFlag = "--disable-cuda-graph"

func prepareRules(m *Matrix, rules []*Rule, cells []*Cell) ([]*ruleEval, *flagTable) {
	ft := &flagTable{idx: map[string]int{}}
	ft.add(cudaGraphFlag)
	variesCache := map[string]bool{}
	varies := func(name string) bool {
		if v, ok := variesCache[name]; ok {
			return v
		}
		var first string
		firstSet, diff := false, false
		for i, c := range cells {
			v, ok := c.Env[name]
			if i == 0 {
				first, firstSet = v, ok
			} else if ok != firstSet || v != first {
				diff = true
				break
			}
		}
		variesCache[name] = diff
		return diff
	}
	var out []*ruleEval
	for _, r := range rules {
		re := &ruleEval{Rule: r, flag: -1}
		for _, ac := range r.when.axis {
			vals := m.Axes[ac.ai].Values
			ok := make([]bool, len(vals))
			for vi, v := range vals {
				ok[vi] = slices.Contains(ac.keys, v.key())
			}
			re.axisOK = append(re.axisOK, ok)
		}
		for _, f := range r.when.flags {
			re.flags = append(re.flags, ft.add(f))
		}
		for _, f := range r.when.noFlags {
			re.noFlags = append(re.noFlags, ft.add(f))
		}
		for _, fv := range r.when.flagValues {
			re.flagVals = append(re.flagVals, ft.add(fv.name))
		}
		if r.Flag != "" {
			re.flag = ft.add(r.Flag)
		}
		re.varies = len(r.when.varies) == 0
		for _, name := range r.when.varies {
			if varies(name) {
				re.varies = true
			}
		}
		out = append(out, re)
	}
	return out, ft
}

// evalCell is what a rule condition looks at for one cell. Its slices are
// reused from cell to cell.
type evalCell struct {
	cell   *Cell
	majors []int
	ft     *flagTable
	loaded bool
	fv     []string // flag value ("" when bare), by flag table index
	fset   []bool
	// verdicts caches ProbeFacts.verdict by module and major.
	verdicts map[verdictKey]string
}

type verdictKey struct {
	module string
	major  int
}

func (e *evalCell) verdict(pf *ProbeFacts, module string, major int) string {
	k := verdictKey{module, major}
	if v, ok := e.verdicts[k]; ok {
		return v
	}
	if e.verdicts == nil {
		e.verdicts = map[verdictKey]string{}
	}
	v := pf.verdict(module, major)
	e.verdicts[k] = v
	return v
}

func (e *evalCell) reset(c *Cell) {
	e.cell = c
	e.loaded = false
}

func (e *evalCell) loadFlags() {
	if e.loaded {
		return
	}
	e.loaded = true
	n := len(e.ft.idx)
	if len(e.fset) != n {
		e.fv, e.fset = make([]string, n), make([]bool, n)
	}
	clear(e.fset)
	cmd := e.cell.Command
	for i, a := range cmd {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		k, v, eq := strings.Cut(a, "=")
		j, ok := e.ft.idx[k]
		if !ok {
			continue
		}
		if !eq {
			v = ""
			if i+1 < len(cmd) && !strings.HasPrefix(cmd[i+1], "--") {
				v = cmd[i+1]
			}
		}
		e.fv[j], e.fset[j] = v, true
	}
}

// flagMap reads "--flag value" and "--flag=value" pairs from a command.
func flagMap(cmd []string) map[string]string {
	fl := make(map[string]string, len(cmd)/2+1)
	for i, a := range cmd {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		if k, v, ok := strings.Cut(a, "="); ok {
			fl[k] = v
			continue
		}
		v := ""
		if i+1 < len(cmd) && !strings.HasPrefix(cmd[i+1], "--") {
			v = cmd[i+1]
		}
		fl[a] = v
	}
	return fl
}

func (r *ruleEval) match(e *evalCell, pf *ProbeFacts) bool {
	c := &r.when
	cell := e.cell
	if !r.varies {
		return false
	}
	for i, ac := range c.axis {
		if vi := cell.idx[ac.ai]; vi >= 0 {
			if !r.axisOK[i][vi] {
				return false
			}
		} else if !slices.Contains(ac.keys, cell.Values[ac.ai].key()) {
			return false
		}
	}
	for _, ec := range c.env {
		v, set := cell.Env[ec.name]
		if !envMatch(ec.want, v, set) {
			return false
		}
	}
	for _, p := range c.patches {
		if !slices.Contains(cell.Patches, p) {
			return false
		}
	}
	if len(c.smMajor) > 0 {
		ok := false
		for _, m := range e.majors {
			if slices.Contains(c.smMajor, m) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	if c.needFlags {
		e.loadFlags()
		for _, j := range r.flags {
			if !e.fset[j] {
				return false
			}
		}
		for _, j := range r.noFlags {
			if e.fset[j] {
				return false
			}
		}
		for i, j := range r.flagVals {
			if !e.fset[j] || !envMatch(c.flagValues[i].want, e.fv[j], true) {
				return false
			}
		}
		if c.cudaGraphs != nil && *c.cudaGraphs == e.fset[e.ft.idx[cudaGraphFlag]] {
			return false
		}
	}
	if len(c.probeVerdict) > 0 {
		if pf == nil {
			if r.unprobed == 0 {
				r.first = cell.ID
			}
			r.unprobed++
			return false
		}
		if len(e.majors) == 0 {
			return false
		}
		for _, pv := range c.probeVerdict {
			ok := false
			for _, maj := range e.majors {
				if slices.Contains(pv.want, e.verdict(pf, pv.name, maj)) {
					ok = true
				}
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

// envMatch: "*" is any set value, "" is unset, a pattern with '*' is a
// glob, anything else compares case-insensitively.
func envMatch(want []string, v string, set bool) bool {
	for _, w := range want {
		switch {
		case w == "*":
			if set {
				return true
			}
		case w == "":
			if !set {
				return true
			}
		case !set:
		case strings.Contains(w, "*"):
			if ok, _ := path.Match(strings.ToLower(w), strings.ToLower(v)); ok {
				return true
			}
		case strings.EqualFold(w, v):
			return true
		}
	}
	return false
}

package doctor

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/source"
)

// Severity is how bad an obstacle is.
type Severity string

const (
	// Blocker: the launch fails, or silently does other than it asks.
	Blocker Severity = "blocker"
	// Warning: it runs, but slower or with a risk the rule names.
	Warning Severity = "warning"
	// Info: worth knowing before the load; nothing goes wrong.
	Info Severity = "info"
)

// Rule is one known obstacle, as its rule file (rules/ID.toml) says: what
// happens, under which conditions (all of When), with which remedies and
// sources. The evaluator knows condition kinds, never a rule.
type Rule struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Severity Severity `json:"severity"`
	// Happens is what the launch meets: the error text sglang or
	// flashinfer prints, or "runs, but slower: ...". {fact} placeholders
	// are filled from the facts.
	Happens string `json:"happens"`
	// Note says where the code differs from what was reported about the
	// obstacle (the code wins).
	Note    string   `json:"note,omitempty"`
	Sources []string `json:"sources"`
	When    []Cond   `json:"when"`
	Remedy  []Remedy `json:"remedies"`
	// File is the rule file's name, Line the line of each condition of
	// When (for errors about them).
	File string `json:"-"`
}

// Cond is one condition of a rule: a fact (Fact) or a code marker in the
// sglang tree (File), or a group of which one must hold (Any) or all
// (All). Not negates the whole condition.
type Cond struct {
	Fact string `toml:"fact" json:"fact,omitempty"`
	File string `toml:"file" json:"file,omitempty"`
	Any  []Cond `toml:"any" json:"any,omitempty"`
	All  []Cond `toml:"all" json:"all,omitempty"` // every one holds (inside an any)

	// Predicates on a fact's values (one must hold for some value):
	In      []string `toml:"in" json:"in,omitempty"`           // equal to one of these
	Version string   `toml:"version" json:"version,omitempty"` // PEP 440 constraints
	Min     *float64 `toml:"min" json:"min,omitempty"`         // a number at least this
	Max     *float64 `toml:"max" json:"max,omitempty"`         // a number at most this
	Matches string   `toml:"matches" json:"matches,omitempty"` // a regular expression
	Set     *bool    `toml:"set" json:"set,omitempty"`         // the fact has a value (true) or none (false)

	// Predicates on a file (a marker): its text contains or matches; a
	// file that does not exist contains nothing.
	Contains string `toml:"contains" json:"contains,omitempty"`
	Regex    string `toml:"regex" json:"regex,omitempty"`
	Exists   *bool  `toml:"exists" json:"exists,omitempty"` // the file is there (true) or not (false)

	// Not holds when the rest does not.
	Not bool `toml:"not" json:"not,omitempty"`
	// Why says in words what the condition stands for, for the evidence
	// and docs/doctor.md.
	Why string `toml:"why" json:"why,omitempty"`

	re     *regexp.Regexp
	fileRe *regexp.Regexp
}

// Remedy is one way out: a catalog patch, a launch flag, an environment
// variable, a version to install, or a driver or kernel setting. Text says
// what it does.
type Remedy struct {
	Patch   string `toml:"patch" json:"patch,omitempty"`
	Flag    string `toml:"flag" json:"flag,omitempty"`
	Env     string `toml:"env" json:"env,omitempty"`
	Install string `toml:"install" json:"install,omitempty"`
	Setting string `toml:"setting" json:"setting,omitempty"`
	Run     string `toml:"run" json:"run,omitempty"` // a command that makes what is missing
	Text    string `toml:"text" json:"text,omitempty"`
}

// Line is the remedy as one line: "smpatch apply NAME", the flag, the
// variable, "pip install X", or the setting; then its text.
func (r Remedy) Line() string {
	var what string
	switch {
	case r.Patch != "":
		what = "smpatch apply " + r.Patch
	case r.Flag != "":
		what = r.Flag
	case r.Env != "":
		what = r.Env
	case r.Install != "":
		what = "pip install " + r.Install
	case r.Setting != "":
		what = r.Setting
	case r.Run != "":
		what = "run " + r.Run
	}
	if r.Text == "" {
		return what
	}
	return what + ": " + r.Text
}

func (r Remedy) kinds() int {
	n := 0
	for _, s := range []string{r.Patch, r.Flag, r.Env, r.Install, r.Setting, r.Run} {
		if s != "" {
			n++
		}
	}
	return n
}

// TreeOnly reports whether c reads only the sglang tree (its files), so
// that its truth on a commit of history is decided by that commit alone.
func (c *Cond) TreeOnly() bool {
	if g := c.group(); len(g) > 0 {
		for i := range g {
			if !g[i].TreeOnly() {
				return false
			}
		}
		return true
	}
	return c.File != "" || treeFact(c.Fact)
}

// treeFact reports whether a fact is read from the tree alone: its pins,
// and what the compatibility table says of them.
func treeFact(name string) bool {
	return strings.HasPrefix(name, "pin.") || strings.HasPrefix(name, "compat.")
}

// group is c's members when it is a group.
func (c *Cond) group() []Cond {
	if len(c.Any) > 0 {
		return c.Any
	}
	return c.All
}

// Files are the tree files c reads.
func (c *Cond) Files() []string {
	if c.File != "" {
		return []string{c.File}
	}
	if treeFact(c.Fact) {
		return []string{pyprojectFile}
	}
	var out []string
	g := c.group()
	for i := range g {
		out = append(out, g[i].Files()...)
	}
	return out
}

// check validates c and compiles its expressions; where names it in errors.
func (c *Cond) check(where string) error {
	subjects := 0
	for _, s := range []bool{c.Fact != "", c.File != "", len(c.Any) > 0, len(c.All) > 0} {
		if s {
			subjects++
		}
	}
	if subjects != 1 {
		return fmt.Errorf("%s: a condition has exactly one of fact, file, any, all", where)
	}
	factPreds := len(c.In) > 0 || c.Version != "" || c.Min != nil || c.Max != nil || c.Matches != "" || c.Set != nil
	filePreds := c.Contains != "" || c.Regex != "" || c.Exists != nil
	switch {
	case len(c.group()) > 0:
		if factPreds || filePreds {
			return fmt.Errorf("%s: an any or all group holds conditions only", where)
		}
		g := c.group()
		if len(g) < 2 {
			return fmt.Errorf("%s: a group of one condition is that condition", where)
		}
		for i := range g {
			if err := g[i].check(fmt.Sprintf("%s, member %d", where, i+1)); err != nil {
				return err
			}
		}
	case c.Fact != "":
		if filePreds {
			return fmt.Errorf("%s: fact %q: contains, regex and exists are for files", where, c.Fact)
		}
		if !factPreds {
			return fmt.Errorf("%s: fact %q: no predicate (in, version, min, max, matches, set)", where, c.Fact)
		}
		if err := checkFactName(c.Fact); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if c.Version != "" {
			if _, err := source.ParseConstraints(c.Version); err != nil {
				return fmt.Errorf("%s: fact %q: version %q: %v", where, c.Fact, c.Version, err)
			}
		}
		if c.Matches != "" {
			re, err := lazyre.Compile(c.Matches)
			if err != nil {
				return fmt.Errorf("%s: fact %q: matches: %v", where, c.Fact, err)
			}
			c.re = re
		}
	default:
		if factPreds {
			return fmt.Errorf("%s: file %q: in, version, min, max, matches and set are for facts", where, c.File)
		}
		if rel, err := source.CleanRel(c.File); err != nil || rel != c.File {
			return fmt.Errorf("%s: file %q: a clean path of the sglang repository", where, c.File)
		}
		n := 0
		for _, s := range []bool{c.Contains != "", c.Regex != "", c.Exists != nil} {
			if s {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: file %q: exactly one of contains, regex, exists", where, c.File)
		}
		if c.Regex != "" {
			re, err := lazyre.Compile("(?m)" + c.Regex)
			if err != nil {
				return fmt.Errorf("%s: file %q: regex: %v", where, c.File, err)
			}
			c.fileRe = re
		}
	}
	return nil
}

// describe is the condition in words, for the list and the docs.
func (c *Cond) describe() string {
	var s string
	switch {
	case len(c.group()) > 0:
		g := c.group()
		parts := make([]string, len(g))
		for i := range g {
			parts[i] = g[i].describe()
		}
		word := "any of"
		if len(c.All) > 0 {
			word = "all of"
		}
		s = word + " (" + strings.Join(parts, "; ") + ")"
	case c.File != "":
		switch {
		case c.Contains != "":
			s = fmt.Sprintf("%s contains %q", c.File, c.Contains)
		case c.Regex != "":
			s = fmt.Sprintf("%s matches /%s/", c.File, c.Regex)
		case *c.Exists:
			s = c.File + " exists"
		default:
			s = c.File + " does not exist"
		}
	default:
		var ps []string
		if len(c.In) > 0 {
			ps = append(ps, "in ["+strings.Join(c.In, ", ")+"]")
		}
		if c.Version != "" {
			ps = append(ps, c.Version)
		}
		if c.Min != nil {
			ps = append(ps, fmt.Sprintf(">= %g", *c.Min))
		}
		if c.Max != nil {
			ps = append(ps, fmt.Sprintf("<= %g", *c.Max))
		}
		if c.Matches != "" {
			ps = append(ps, "matches /"+c.Matches+"/")
		}
		if c.Set != nil {
			if *c.Set {
				ps = append(ps, "is set")
			} else {
				ps = append(ps, "is not set")
			}
		}
		s = c.Fact + " " + strings.Join(ps, ", ")
	}
	if c.Not {
		s = "not " + s
	}
	if c.Why != "" {
		s += " (" + c.Why + ")"
	}
	return s
}

// Conditions are the rule's conditions in words.
func (r *Rule) Conditions() []string {
	out := make([]string, len(r.When))
	for i := range r.When {
		out[i] = r.When[i].describe()
	}
	return out
}

// TreeConds are the conditions of r that read only the tree: what decides
// its window over sglang's history.
func (r *Rule) TreeConds() []*Cond {
	var out []*Cond
	for i := range r.When {
		if r.When[i].TreeOnly() {
			out = append(out, &r.When[i])
		}
	}
	return out
}

// TreeFiles are the tree files r's conditions read, sorted, once each.
func (r *Rule) TreeFiles() []string {
	seen := map[string]bool{}
	var out []string
	for i := range r.When {
		for _, f := range r.When[i].Files() {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return sortedCopy(out)
}

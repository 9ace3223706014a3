package doctor

import (
	"fmt"
	"maps"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/internal/testkit/treetest"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
)

// Every rule is checked on facts and trees made from its own conditions:
// one set where every condition holds (the rule must fire), and, for each
// condition, one where it alone fails (the rule must not fire). Removing
// a condition from a rule file makes that second case fire: the test
// fails.

// fixture is an assignment of facts and tree files.
type fixture struct {
	facts map[string][]string // nil slice: known to have no value
	files map[string]*fileSpec
}

type fileSpec struct {
	need   []string
	forbid []string
	absent bool
}

func newFixture() *fixture {
	return &fixture{facts: map[string][]string{}, files: map[string]*fileSpec{}}
}

func (fx *fixture) clone() *fixture {
	c := newFixture()
	maps.Copy(c.facts, fx.facts)
	for k, v := range fx.files {
		cp := *v
		cp.need, cp.forbid = slices.Clone(v.need), slices.Clone(v.forbid)
		c.files[k] = &cp
	}
	return c
}

// solve makes c evaluate to want in fx.
func (fx *fixture) solve(c *Cond, want bool) error {
	if c.Not {
		inner := *c
		inner.Not = false
		return fx.solve(&inner, !want)
	}
	switch {
	case len(c.Any) > 0 && want, len(c.All) > 0 && !want:
		// One member decides: the first that can.
		var errs []string
		for i := range c.group() {
			try := fx.clone()
			if err := try.solve(&c.group()[i], want); err == nil {
				*fx = *try
				return nil
			} else {
				errs = append(errs, err.Error())
			}
		}
		return fmt.Errorf("no member of %s can be %v: %s", c.describe(), want, strings.Join(errs, "; "))
	case len(c.group()) > 0:
		for i := range c.group() {
			if err := fx.solve(&c.group()[i], want); err != nil {
				return err
			}
		}
		return nil
	case c.File != "":
		return fx.solveFile(c, want)
	}
	return fx.solveFact(c, want)
}

func (fx *fixture) solveFile(c *Cond, want bool) error {
	fs := fx.files[c.File]
	if fs == nil {
		fs = &fileSpec{}
		fx.files[c.File] = fs
	}
	switch {
	case c.Exists != nil:
		if *c.Exists != want {
			if len(fs.need) > 0 {
				return fmt.Errorf("%s must be absent but must hold %q", c.File, fs.need)
			}
			fs.absent = true
		} else if fs.absent {
			return fmt.Errorf("%s must exist and be absent", c.File)
		}
		return nil
	case fs.absent && want:
		return fmt.Errorf("%s must be absent and hold text", c.File)
	}
	text := c.Contains
	if c.Regex != "" {
		s, err := sample(c.Regex)
		if err != nil {
			return err
		}
		text = s
	}
	if want {
		fs.need = append(fs.need, text)
	} else {
		fs.forbid = append(fs.forbid, text)
	}
	return nil
}

func (fx *fixture) solveFact(c *Cond, want bool) error {
	if cur, ok := fx.facts[c.Fact]; ok {
		if c.holds(cur) == want {
			return nil
		}
		return fmt.Errorf("%s = %v cannot make %s %v", c.Fact, cur, c.describe(), want)
	}
	for _, cand := range candidates(c) {
		if c.holds(cand) == want {
			fx.facts[c.Fact] = cand
			return nil
		}
	}
	return fmt.Errorf("no value makes %s %v", c.describe(), want)
}

// holds is the evaluator's fact predicate on vals.
func (c *Cond) holds(vals []string) bool {
	f := newFacts()
	f.known[c.Fact] = Value{Vals: vals}
	e := newEvaluator(f, nil, "")
	inner := *c
	inner.Not = false
	t, _ := e.fact(&inner)
	return t == yes
}

// candidates are values to try for a fact condition: its own literals,
// numbers around its bounds, versions around its constraints, a sample
// of its pattern, no value, and one matching nothing.
func candidates(c *Cond) [][]string {
	var out [][]string
	for _, v := range c.In {
		out = append(out, []string{v})
	}
	for _, b := range []*float64{c.Min, c.Max} {
		if b != nil {
			for _, d := range []float64{0, 1, -1} {
				out = append(out, []string{strconv.FormatFloat(*b+d, 'g', -1, 64)})
			}
		}
	}
	if c.Version != "" {
		for _, part := range strings.Split(c.Version, ",") {
			v := strings.TrimLeft(strings.TrimSpace(part), "<>=!~ ")
			out = append(out, []string{v})
			nums := strings.Split(strings.TrimRightFunc(v, func(r rune) bool { return r < '0' || r > '9' }), ".")
			last := len(nums) - 1
			if n, err := strconv.Atoi(strings.TrimRightFunc(nums[last], func(r rune) bool { return r < '0' || r > '9' })); err == nil {
				for _, d := range []int{1, -1} {
					cp := slices.Clone(nums)
					cp[last] = strconv.Itoa(n + d)
					out = append(out, []string{strings.Join(cp, ".")})
				}
			}
		}
		out = append(out, []string{"0.0.1"}, []string{"99.0"})
	}
	if c.Matches != "" {
		if s, err := sample(c.Matches); err == nil {
			out = append(out, []string{s})
		}
	}
	out = append(out, []string{"x"}, nil, []string{"zzz-none"})
	return out
}

// sample is a short string the regular expression matches.
func sample(expr string) (string, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	var walk func(*syntax.Regexp)
	walk = func(r *syntax.Regexp) {
		switch r.Op {
		case syntax.OpLiteral:
			b.WriteString(string(r.Rune))
		case syntax.OpCharClass:
			if len(r.Rune) > 0 {
				b.WriteRune(r.Rune[0])
			}
		case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
			b.WriteByte('a')
		case syntax.OpPlus, syntax.OpCapture:
			walk(r.Sub[0])
		case syntax.OpRepeat:
			for range r.Min {
				walk(r.Sub[0])
			}
		case syntax.OpConcat:
			for _, s := range r.Sub {
				walk(s)
			}
		case syntax.OpAlternate:
			walk(r.Sub[0])
		}
	}
	walk(re)
	return b.String(), nil
}

// build turns the fixture into facts and a tree.
func (fx *fixture) build(t *testing.T) (*Facts, source.Tree) {
	f := newFacts()
	for k, v := range fx.facts {
		f.known[k] = Value{Vals: v, From: "fixture"}
	}
	f.env = map[string]string{}
	for k, v := range fx.facts {
		if name, ok := strings.CutPrefix(k, "env."); ok {
			delete(f.known, k)
			if len(v) > 0 {
				f.env[name] = v[0]
			}
		}
	}
	files := map[string]string{"python/sglang/__init__.py": ""}
	for p, fs := range fx.files {
		if fs.absent {
			continue
		}
		text := strings.Join(fs.need, "\n") + "\n"
		for _, bad := range fs.forbid {
			if strings.Contains(text, bad) {
				t.Fatalf("%s must hold %q and not %q", p, fs.need, bad)
			}
		}
		files[p] = text
	}
	dir := t.TempDir()
	treetest.Write(t, dir, files)
	tree, err := source.OpenCheckout(dir)
	if err != nil {
		t.Fatal(err)
	}
	return f, tree
}

func decide(t *testing.T, r *Rule, fx *fixture) (*Finding, *Undecided) {
	f, tree := fx.build(t)
	return newEvaluator(f, tree, "").rule(r)
}

func TestEachRuleFiresOnItsConditionsAndNotWithoutOne(t *testing.T) {
	rules, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) < 30 {
		t.Fatalf("%d built-in rules, want the issue's list", len(rules))
	}
	for _, r := range rules {
		t.Run(r.ID, func(t *testing.T) {
			pos := newFixture()
			for i := range r.When {
				if err := pos.solve(&r.When[i], true); err != nil {
					t.Fatalf("no fixture where every condition holds: condition %d: %v", i+1, err)
				}
			}
			if fd, ud := decide(t, r, pos); fd == nil {
				t.Fatalf("does not fire where every condition holds (undecided: %+v)", ud)
			}
			for i := range r.When {
				neg := newFixture()
				if err := neg.solve(&r.When[i], false); err != nil {
					t.Fatalf("condition %d cannot fail: %v", i+1, err)
				}
				for j := range r.When {
					if j != i {
						if err := neg.solve(&r.When[j], true); err != nil {
							t.Fatalf("condition %d fails alone: condition %d: %v", i+1, j+1, err)
						}
					}
				}
				if fd, ud := decide(t, r, neg); fd != nil || ud != nil {
					t.Errorf("fires (or is undecided) when condition %d (%s) fails: finding %v, undecided %v", i+1, r.When[i].describe(), fd != nil, ud)
				}
				// The rule without condition i fires there: that condition,
				// and nothing else, keeps the rule quiet.
				cut := *r
				cut.When = slices.Delete(slices.Clone(r.When), i, i+1)
				if fd, _ := decide(t, &cut, neg); fd == nil {
					t.Errorf("without condition %d it does not fire where only that condition fails", i+1)
				}
			}
		})
	}
}

// TestRuleRemediesNameCatalogPatches: a remedy names only patches the
// built-in catalog has.
func TestRuleRemediesNameCatalogPatches(t *testing.T) {
	rules, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		for _, rm := range r.Remedy {
			if rm.Patch != "" {
				if _, err := cat.Get(rm.Patch); err != nil {
					t.Errorf("%s: remedy names patch %q: %v", r.ID, rm.Patch, err)
				}
			}
		}
	}
}

// A rule's regular expression past lazyre.MaxSource is refused in one line
// naming the file and line, before it is compiled.
func TestRuleRegexBounded(t *testing.T) {
	head := "title = \"t\"\nseverity = \"info\"\nhappens = \"h\"\nsources = [\"https://example.org/1\"]\n[[remedy]]\nflag = \"--x\"\n"
	for _, when := range []string{
		"[[when]]\nfile = \"python/sglang/a.py\"\nregex = \"" + strings.Repeat("a", 1<<20) + "\"\n",
		"[[when]]\nfact = \"gpu.name\"\nmatches = \"" + strings.Repeat("a", 1<<20) + "\"\n",
	} {
		_, err := ParseRule("big-regex.toml", []byte(head+when))
		if err == nil || !strings.HasPrefix(err.Error(), "big-regex.toml:7: when 1: ") || !strings.Contains(err.Error(), "bytes, more than 4096") {
			t.Errorf("a 1 MiB regex: %v", err)
		}
	}
}

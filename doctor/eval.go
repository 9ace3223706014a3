package doctor

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/source"
)

// truth is a condition's value: holds, does not hold, or cannot be told
// (a fact that could not be read).
type truth int

const (
	no truth = iota
	yes
	unknown
)

// Finding is one obstacle the launch meets: a rule whose every condition
// holds, with the evidence of each and the rule's remedies.
type Finding struct {
	Rule     string   `json:"rule"`
	Title    string   `json:"title"`
	Severity Severity `json:"severity"`
	Happens  string   `json:"happens"`
	Evidence []string `json:"evidence"`
	Remedies []string `json:"remedies"`
	Sources  []string `json:"sources"`
	Note     string   `json:"note,omitempty"`
}

// Undecided is a rule doctor could not decide: none of its conditions
// fails, and some could not be read (Missing says which, and why).
type Undecided struct {
	Rule     string   `json:"rule"`
	Title    string   `json:"title"`
	Severity Severity `json:"severity"`
	Missing  []string `json:"missing"`
}

// evaluator decides rules on the facts and the tree's files.
type evaluator struct {
	facts   *Facts
	tree    source.Tree // nil when no tree was read
	why     string      // why there is no tree
	files   map[string]fileText
	matches map[string]int // file, text, pattern → the line of the first match (0: none)
	// patchFit says how a remedy's patch fares on the tree (nil: not asked)
	patchFit func(name string) string
}

type fileText struct {
	data []byte
	err  error // fs.ErrNotExist for a file the tree does not have
}

func newEvaluator(f *Facts, t source.Tree, noTree string) *evaluator {
	return &evaluator{facts: f, tree: t, why: noTree, files: map[string]fileText{}, matches: map[string]int{}}
}

// read is the tree's file rel, read once.
func (e *evaluator) read(rel string) fileText {
	if ft, ok := e.files[rel]; ok {
		return ft
	}
	data, err := e.tree.ReadFile(rel)
	ft := fileText{data: data, err: err}
	e.files[rel] = ft
	return ft
}

// rule decides r: a finding when every condition holds, an undecided
// entry when none fails and some cannot be told, neither when one fails.
func (e *evaluator) rule(r *Rule) (*Finding, *Undecided) {
	var evidence, missing []string
	for i := range r.When {
		t, ev := e.cond(&r.When[i])
		switch t {
		case no:
			return nil, nil
		case unknown:
			missing = append(missing, ev...)
		default:
			evidence = append(evidence, ev...)
		}
	}
	if len(missing) > 0 {
		return nil, &Undecided{Rule: r.ID, Title: r.Title, Severity: r.Severity, Missing: dedupe(missing)}
	}
	f := &Finding{Rule: r.ID, Title: r.Title, Severity: r.Severity, Happens: e.fill(r.Happens), Evidence: dedupe(evidence), Sources: r.Sources, Note: e.fill(r.Note)}
	for _, rm := range r.Remedy {
		rm.Flag, rm.Env, rm.Install, rm.Setting, rm.Run, rm.Text = e.fill(rm.Flag), e.fill(rm.Env), e.fill(rm.Install), e.fill(rm.Setting), e.fill(rm.Run), e.fill(rm.Text)
		line := rm.Line()
		if rm.Patch != "" && e.patchFit != nil {
			if fit := e.patchFit(rm.Patch); fit != "" {
				line += " [on this tree: " + fit + "]"
			}
		}
		f.Remedies = append(f.Remedies, line)
	}
	return f, nil
}

// cond decides c: its truth, and the evidence (when it holds) or what
// could not be read (when unknown).
func (e *evaluator) cond(c *Cond) (truth, []string) {
	var t truth
	var ev []string
	switch {
	case len(c.Any) > 0:
		t, ev = e.anyOf(c.Any)
	case len(c.All) > 0:
		t, ev = e.allOf(c.All)
	case c.File != "":
		t, ev = e.file(c)
	default:
		t, ev = e.fact(c)
	}
	if c.Not {
		switch t {
		case yes:
			return no, nil
		case no:
			return yes, ev
		}
	}
	return t, ev
}

// anyOf holds when one of cs holds; unknown when none holds and one is
// unknown. The evidence of a group that holds is its first holding
// member's; of one that does not, every member's (for Not).
func (e *evaluator) anyOf(cs []Cond) (truth, []string) {
	var missing, against []string
	for i := range cs {
		t, ev := e.cond(&cs[i])
		switch t {
		case yes:
			return yes, ev
		case unknown:
			missing = append(missing, ev...)
		default:
			against = append(against, e.against(&cs[i])...)
		}
	}
	if len(missing) > 0 {
		return unknown, missing
	}
	return no, against
}

// allOf holds when every one of cs holds; it fails when one fails, and
// is unknown otherwise when one is unknown.
func (e *evaluator) allOf(cs []Cond) (truth, []string) {
	var ev, missing []string
	for i := range cs {
		t, got := e.cond(&cs[i])
		switch t {
		case no:
			return no, got
		case unknown:
			missing = append(missing, got...)
		default:
			ev = append(ev, got...)
		}
	}
	if len(missing) > 0 {
		return unknown, missing
	}
	return yes, ev
}

// against is the evidence that c does not hold, for a negated group.
func (e *evaluator) against(c *Cond) []string {
	neg := *c
	neg.Not = !c.Not
	t, ev := e.cond(&neg)
	if t == yes {
		return ev
	}
	return nil
}

// file decides a marker condition on the tree.
func (e *evaluator) file(c *Cond) (truth, []string) {
	if e.tree == nil {
		return unknown, []string{c.File + ": no sglang tree read (" + e.why + ")"}
	}
	ft := e.read(c.File)
	if ft.err != nil && !errors.Is(ft.err, fs.ErrNotExist) {
		return unknown, []string{fmt.Sprintf("%s: %v", c.File, ft.err)}
	}
	exists := ft.err == nil
	var holds bool
	var line int
	var what string
	switch {
	case c.Exists != nil:
		holds = exists == *c.Exists
	case c.Contains != "":
		what = fmt.Sprintf("%q", c.Contains)
		if exists {
			line = e.match(c, ft.data)
			holds = line > 0
		}
	default:
		what = "/" + c.Regex + "/"
		if exists {
			line = e.match(c, ft.data)
			holds = line > 0
		}
	}
	positive := holds != c.Not // the evidence says what is there or what is not
	var ev string
	switch {
	case !exists:
		ev = c.File + ": not in this tree"
	case positive && line > 0:
		ev = fmt.Sprintf("%s:%d: %s", c.File, line, lineText(ft.data, line))
	case c.Exists != nil:
		ev = c.File + ": in this tree"
	default:
		ev = fmt.Sprintf("%s: no %s", c.File, what)
	}
	if c.Why != "" {
		ev += " (" + c.Why + ")"
	}
	if holds {
		return yes, []string{ev}
	}
	return no, []string{ev}
}

// match is the line of c's text or pattern in data, 0 when absent; each
// (file, text, pattern) is searched once.
func (e *evaluator) match(c *Cond, data []byte) int {
	key := c.File + "\x00" + c.Contains + "\x00" + c.Regex
	if line, ok := e.matches[key]; ok {
		return line
	}
	line := 0
	if c.Contains != "" {
		if i := bytes.Index(data, []byte(c.Contains)); i >= 0 {
			line = lineAt(data, i)
		}
	} else if loc := c.fileRe.FindIndex(data); loc != nil {
		line = lineAt(data, loc[0])
	}
	e.matches[key] = line
	return line
}

// fact decides a condition on a fact's values: it holds when one value
// passes every predicate (Set looks at whether there is a value at all).
func (e *evaluator) fact(c *Cond) (truth, []string) {
	v, ok, why := e.facts.Lookup(c.Fact)
	if !ok {
		return unknown, []string{c.Fact + ": unknown (" + why + ")"}
	}
	holds := false
	if c.Set != nil {
		holds = (len(v.Vals) > 0) == *c.Set
		if holds && (len(c.In) > 0 || c.Version != "" || c.Min != nil || c.Max != nil || c.Matches != "") {
			holds = slices.ContainsFunc(v.Vals, c.valueHolds)
		}
	} else {
		holds = slices.ContainsFunc(v.Vals, c.valueHolds)
	}
	ev := factEvidence(c.Fact, v)
	if c.Why != "" {
		ev += " (" + c.Why + ")"
	}
	if holds {
		return yes, []string{ev}
	}
	return no, []string{ev}
}

// valueHolds is whether one value passes c's value predicates.
func (c *Cond) valueHolds(s string) bool {
	if len(c.In) > 0 && !slices.Contains(c.In, s) {
		return false
	}
	if c.Version != "" {
		v, err := source.ParseVersion(s)
		if err != nil {
			return false
		}
		ok, err := source.SatisfiesText(c.Version, v)
		if err != nil || !ok {
			return false
		}
	}
	if c.Min != nil || c.Max != nil {
		n, err := strconv.ParseFloat(s, 64)
		if err != nil || c.Min != nil && n < *c.Min || c.Max != nil && n > *c.Max {
			return false
		}
	}
	if c.re != nil && !c.re.MatchString(s) {
		return false
	}
	return true
}

func factEvidence(name string, v Value) string {
	val := "not set"
	if len(v.Vals) > 0 {
		val = strings.Join(v.Vals, ", ")
	}
	if v.From == "" {
		return name + " = " + val
	}
	return name + " = " + val + " (" + v.From + ")"
}

var placeholderRe = lazyre.New(`\{([a-z][A-Za-z0-9_.-]*)\}`)

// fill replaces each {fact} in s by the fact's values ("unknown" when
// it could not be read, "not set" when it has none).
func (e *evaluator) fill(s string) string {
	if !strings.Contains(s, "{") {
		return s
	}
	return placeholderRe().ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok, _ := e.facts.Lookup(name)
		switch {
		case !ok:
			return "unknown"
		case len(v.Vals) == 0:
			return "not set"
		}
		return strings.Join(v.Vals, ", ")
	})
}

// lineAt is the 1-based line of byte offset i.
func lineAt(data []byte, i int) int { return 1 + bytes.Count(data[:i], []byte("\n")) }

// lineText is line n of data, trimmed and cut to 160 bytes.
func lineText(data []byte, n int) string {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(data, '\n')
		if j < 0 {
			return ""
		}
		data = data[j+1:]
	}
	if j := bytes.IndexByte(data, '\n'); j >= 0 {
		data = data[:j]
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

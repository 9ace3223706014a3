package compat

import (
	"fmt"
	"slices"
	"strings"
)

// SGLangAt is the sglang revision of version v (a release: "0.5.14"), or
// the main branch's newest commit for "main".
func (t *Table) SGLangAt(v string) (*SGLang, bool) {
	for i := range t.SGLang {
		s := &t.SGLang[i]
		if s.Version == "" && s.Ref == v || s.Version != "" && sameVersion(s.Version, v) {
			return s, true
		}
	}
	return nil, false
}

// FlashInferAt is the flashinfer revision of version v ("0.6.17",
// "0.6.17+cu130"), or "main".
func (t *Table) FlashInferAt(v string) (*FlashInfer, bool) {
	for i := range t.FlashInfer {
		f := &t.FlashInfer[i]
		if f.Version == "" && f.Ref == v || f.Version != "" && sameVersion(f.Version, v) {
			return f, true
		}
	}
	return nil, false
}

// Pinned is the flashinfer sglang release v pins, with where it was read.
func (t *Table) Pinned(v string) (Pin, bool) {
	s, ok := t.SGLangAt(v)
	if !ok || s.Pin.FlashInfer == "" {
		return Pin{}, false
	}
	return s.Pin, true
}

// FusionSM12 is whether flashinfer release v builds the fused all-reduce
// for SM12x, with the code that says so; false when the table has no v.
func (t *Table) FusionSM12(v string) (Fusion, bool) {
	f, ok := t.FlashInferAt(v)
	if !ok {
		return Fusion{}, false
	}
	return f.Fusion, true
}

// Finding is one flashinfer name an sglang revision uses that a flashinfer
// revision does not provide as used.
type Finding struct {
	Symbol string `json:"symbol"`
	Fusion bool   `json:"fusion,omitempty"`
	At     string `json:"at"`    // where sglang uses it
	State  string `json:"state"` // Missing, Unknown, or Present with Keywords
	Why    string `json:"why,omitempty"`
	// Keywords are keywords sglang passes that the definition does not take.
	Keywords []string `json:"keywords,omitempty"`
	// Tried: sglang uses it only inside try blocks (it copes without).
	Tried bool `json:"tried,omitempty"`
}

func (f Finding) String() string {
	what := f.State
	if len(f.Keywords) > 0 {
		what = "keyword " + strings.Join(f.Keywords, ", ") + " not taken"
	}
	if f.Tried {
		what += ", used under try"
	}
	return f.Symbol + " (" + what + ")"
}

// Report is one sglang revision's flashinfer names checked against one
// flashinfer revision.
type Report struct {
	SGLang     Revision `json:"sglang"`
	FlashInfer Revision `json:"flashinfer"`
	Pinned     bool     `json:"pinned"` // FlashInfer is the sglang revision's pin
	Fusion     Fusion   `json:"fusion_sm12"`
	// Symbols counts the names used, OK those present with every keyword
	// passed taken; Fusion* the same for the fusion path's names.
	Symbols       int       `json:"symbols"`
	OK            int       `json:"ok"`
	FusionSymbols int       `json:"fusion_symbols"`
	FusionOK      int       `json:"fusion_ok"`
	Problems      []Finding `json:"problems"`
}

// FusionProblems are the problems of the fusion path's names.
func (r *Report) FusionProblems() []Finding {
	return slices.DeleteFunc(slices.Clone(r.Problems), func(f Finding) bool { return !f.Fusion })
}

// Summary is "N of M names present ..., missing: ...".
func (r *Report) Summary() string {
	s := fmt.Sprintf("%d of %d flashinfer names present as used", r.OK, r.Symbols)
	if len(r.Problems) == 0 {
		return s
	}
	var parts []string
	for _, f := range r.Problems {
		parts = append(parts, f.String())
	}
	return s + "; not: " + strings.Join(parts, ", ")
}

// Changed are r's problems that base (the same sglang against another
// flashinfer, its pin) does not have.
func (r *Report) Changed(base *Report) []Finding {
	had := map[string]bool{}
	if base != nil {
		for _, f := range base.Problems {
			had[f.Symbol] = true
		}
	}
	var out []Finding
	for _, f := range r.Problems {
		if !had[f.Symbol] {
			out = append(out, f)
		}
	}
	return out
}

// Check checks sglang revision sg's flashinfer names against flashinfer
// revision fi (versions, or "main"); false when the table has either not.
func (t *Table) Check(sg, fi string) (*Report, bool) {
	s, ok := t.SGLangAt(sg)
	if !ok {
		return nil, false
	}
	f, ok := t.FlashInferAt(fi)
	if !ok {
		return nil, false
	}
	return t.check(s, f), true
}

func (t *Table) check(s *SGLang, f *FlashInfer) *Report {
	if t.fiIndex == nil {
		t.index()
	}
	i := t.fiIndex[f.Ref]
	r := &Report{SGLang: s.Revision, FlashInfer: f.Revision, Fusion: f.Fusion, Problems: []Finding{},
		Pinned: s.Pin.FlashInfer != "" && f.Version != "" && sameVersion(s.Pin.FlashInfer, f.Version)}
	for _, u := range s.Uses {
		r.Symbols++
		if u.Fusion {
			r.FusionSymbols++
		}
		fd := Finding{Symbol: u.Symbol, Fusion: u.Fusion, At: u.At, Tried: u.Tried}
		run, ok := t.runAt(u.Symbol, i)
		switch {
		case !ok:
			fd.State, fd.Why = Unknown, "not resolved in the table"
		case run.State != Present:
			fd.State, fd.Why = run.State, run.Why
		default:
			fd.State = Present
			if run.ParamsKnown && !run.VarKw {
				for _, k := range u.Kwargs {
					if !slices.Contains(run.Params, k) {
						fd.Keywords = append(fd.Keywords, k)
					}
				}
			}
			if len(fd.Keywords) == 0 {
				r.OK++
				if u.Fusion {
					r.FusionOK++
				}
				continue
			}
			fd.Why = fmt.Sprintf("%s (%s) takes %s", u.Symbol, run.File, strings.Join(run.Params, ", "))
		}
		r.Problems = append(r.Problems, fd)
	}
	return r
}

// runAt is how name resolves in flashinfer revision i.
func (t *Table) runAt(name string, i int) (Run, bool) {
	s, ok := t.bySymbol[name]
	if !ok {
		return Run{}, false
	}
	for _, r := range s.Runs {
		if t.fiIndex[r.From] <= i && i <= t.fiIndex[r.To] {
			return r, true
		}
	}
	return Run{}, false
}

// Install is the flashinfer release to install for sglang revision sg's
// fused all-reduce on SM12x: among the releases that build it, one that
// provides every name the fusion path uses, with the fewest other changes
// from the pin, the oldest on a tie; final releases before release
// candidates, those before main. False when none builds it or the table
// has no sg.
func (t *Table) Install(sg string) (*Report, bool) {
	s, ok := t.SGLangAt(sg)
	if !ok {
		return nil, false
	}
	var base *Report
	if p, ok := t.FlashInferAt(s.Pin.FlashInfer); ok && s.Pin.FlashInfer != "" {
		base = t.check(s, p)
	}
	rank := func(f *FlashInfer) int {
		switch {
		case f.Version == "":
			return 2
		case isRelease(f.Version):
			return 0
		}
		return 1
	}
	var best *Report
	bestRank, bestChanged := 0, 0
	for i := range t.FlashInfer {
		f := &t.FlashInfer[i]
		if f.Fusion.Verdict != Yes {
			continue
		}
		r := t.check(s, f)
		if len(r.FusionProblems()) > 0 {
			continue
		}
		rk, ch := rank(f), len(r.Changed(base))
		if best == nil || rk < bestRank || rk == bestRank && ch < bestChanged {
			best, bestRank, bestChanged = r, rk, ch
		}
	}
	return best, best != nil
}

// FirstFusion is the oldest final flashinfer release that builds the fused
// all-reduce for SM12x (else the oldest revision that does).
func (t *Table) FirstFusion() (*FlashInfer, bool) {
	var first *FlashInfer
	for i := range t.FlashInfer {
		f := &t.FlashInfer[i]
		if f.Fusion.Verdict != Yes {
			continue
		}
		if f.Version != "" && isRelease(f.Version) {
			return f, true
		}
		if first == nil {
			first = f
		}
	}
	return first, first != nil
}

// Advice is what the table says about an sglang tree's fused all-reduce on
// SM12x with the flashinfer it pins.
type Advice struct {
	// Known is false when nothing could be said: no pin, and a version the
	// table has no revision of. Text says why.
	Known bool
	// OK: the pinned flashinfer builds the fused all-reduce for SM12x.
	OK bool
	// Install is the flashinfer version to install instead ("" when OK or
	// when none is known); Report is the tree's names checked against it
	// (nil when the table has no revision of the tree's version).
	Install string
	Report  *Report
	Text    string
}

// Advise reads the table for an sglang tree of version sg (as the tree
// says: "0.5.14", "0.5.13.post2.dev7+g349a6af6b") that pins pin (read from
// the tree; empty: the table's pin for sg).
func (t *Table) Advise(sg string, pin Pin) Advice {
	s, inTable := t.SGLangAt(sg)
	if pin.FlashInfer == "" && inTable {
		pin = s.Pin
		if pin.FlashInferFrom != "" {
			pin.FlashInferFrom += " at " + s.Ref + ", the compatibility table"
		}
	}
	name := "sglang " + orUnknownVersion(sg)
	if pin.FlashInfer == "" {
		if pin.Spec != "" {
			return Advice{Text: fmt.Sprintf("%s asks for %s (%s), no exact flashinfer version: which one is installed decides", name, pin.Spec, pin.FlashInferFrom)}
		}
		return Advice{Text: fmt.Sprintf("%s: no flashinfer pin read from the tree, and the compatibility table has no such sglang release", name)}
	}
	pinText := fmt.Sprintf("%s pins flashinfer %s (%s)", name, pin.FlashInfer, pin.FlashInferFrom)
	f, ok := t.FlashInferAt(pin.FlashInfer)
	if !ok {
		return Advice{Text: pinText + ", which the compatibility table has no revision of (" + t.flashInferSpan() + ")"}
	}
	if f.Fusion.Verdict == Yes {
		a := Advice{Known: true, OK: true, Text: pinText + ", which builds the SM12x fused all-reduce (" + fusionEvidence(f.Fusion) + ")"}
		if inTable {
			a.Report = t.check(s, f)
			if p := a.Report.FusionProblems(); len(p) > 0 {
				a.OK = false
				a.Text += "; but its fusion path uses " + findingList(p)
			}
		}
		return a
	}
	a := Advice{Known: true}
	a.Text = pinText + ", which has no SM12x kernel for the fused all-reduce (" + fusionEvidence(f.Fusion) + ")"
	if !inTable {
		if first, ok := t.FirstFusion(); ok {
			a.Install = first.Name()
			a.Text += fmt.Sprintf("; %s is the first flashinfer that builds it (whether it has every name this tree uses is not known: the table has no sglang %s)", first.Name(), orUnknownVersion(sg))
		}
		return a
	}
	r, ok := t.Install(sg)
	if !ok {
		a.Text += "; no flashinfer revision in the table both builds it and provides the names its fusion path uses (" + t.flashInferSpan() + ")"
		return a
	}
	a.Install, a.Report = r.FlashInfer.Name(), r
	var base *Report
	if pinned, ok := t.FlashInferAt(pin.FlashInfer); ok {
		base = t.check(s, pinned)
	}
	changed := r.Changed(base)
	a.Text += fmt.Sprintf("; %s provides the %d names its fusion path uses", a.Install, r.FusionSymbols)
	if len(changed) == 0 {
		a.Text += fmt.Sprintf(", and no other name it uses fares worse than with its pin (%d of %d present as used)", r.OK, r.Symbols)
	} else {
		a.Text += fmt.Sprintf(", and %d other import(s) changed: %s", len(changed), findingList(changed))
	}
	a.Text += "; install flashinfer-python==" + a.Install
	return a
}

func (t *Table) flashInferSpan() string {
	if len(t.FlashInfer) == 0 {
		return "no flashinfer revision read"
	}
	return "it has " + t.FlashInfer[0].Name() + " to " + t.FlashInfer[len(t.FlashInfer)-1].Name()
}

func orUnknownVersion(v string) string {
	if v == "" {
		return "(version unknown)"
	}
	return v
}

// findingList names at most 6 findings, then how many more.
func findingList(fs []Finding) string {
	var parts []string
	for i, f := range fs {
		if i == 6 {
			parts = append(parts, fmt.Sprintf("and %d more", len(fs)-6))
			break
		}
		parts = append(parts, f.String())
	}
	return strings.Join(parts, ", ")
}

// fusionEvidence is the gate and the guards of a fusion verdict in a few
// words.
func fusionEvidence(f Fusion) string {
	var parts []string
	if f.Gate != "" {
		parts = append(parts, f.Gate)
	}
	switch {
	case f.Guards > 0:
		g := fmt.Sprintf("%d `__CUDA_ARCH__ < 1200` guard(s)", f.Guards)
		if f.GuardAt != "" {
			g += ", the first at " + f.GuardAt
		}
		parts = append(parts, g)
	case f.Verdict == Yes:
		parts = append(parts, "no header guard excludes SM12x")
	}
	if len(parts) == 0 && len(f.Reasons) > 0 {
		parts = append(parts, f.Reasons[0])
	}
	return strings.Join(parts, "; ")
}

// The questions on the embedded table; each is false when the embedded
// table does not read (a test holds it does).

// Pinned is Default().Pinned.
func Pinned(sglangVersion string) (Pin, bool) {
	t, err := Default()
	if err != nil {
		return Pin{}, false
	}
	return t.Pinned(sglangVersion)
}

// FusionSM12 is Default().FusionSM12.
func FusionSM12(flashinferVersion string) (Fusion, bool) {
	t, err := Default()
	if err != nil {
		return Fusion{}, false
	}
	return t.FusionSM12(flashinferVersion)
}

// Check is Default().Check.
func Check(sglangVersion, flashinferVersion string) (*Report, bool) {
	t, err := Default()
	if err != nil {
		return nil, false
	}
	return t.Check(sglangVersion, flashinferVersion)
}

// Install is Default().Install.
func Install(sglangVersion string) (*Report, bool) {
	t, err := Default()
	if err != nil {
		return nil, false
	}
	return t.Install(sglangVersion)
}

// Advise is Default().Advise.
func Advise(sglangVersion string, pin Pin) Advice {
	t, err := Default()
	if err != nil {
		return Advice{Text: err.Error()}
	}
	return t.Advise(sglangVersion, pin)
}

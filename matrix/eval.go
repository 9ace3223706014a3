package matrix

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/smpatch/smpatch/probe"
	"github.com/smpatch/smpatch/source"
)

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
	// unknown counts the cells that matched every condition but the probe
	// facts, when the report could not judge them (the module's verdict is
	// unknown: not installed, not read); unknownFirst and unknownWhy name
	// the first of them.
	unknown      int
	unknownFirst string
	unknownWhy   string
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
	if len(c.tp) > 0 && !slices.Contains(c.tp, max(cell.TP, 1)) {
		return false
	}
	if len(c.tpOutside) > 0 && slices.Contains(c.tpOutside, max(cell.TP, 1)) {
		return false
	}
	for _, name := range c.envEmpty {
		if v, set := cell.Env[name]; !set || v != "" {
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
	if c.nvlink != nil || c.p2p != nil || len(c.versions) > 0 {
		if pf == nil {
			if r.unprobed == 0 {
				r.first = cell.ID
			}
			r.unprobed++
			return false
		}
		unknown := ""
		if c.nvlink != nil && (pf.NVLink == nil || *pf.NVLink != *c.nvlink) {
			if pf.NVLink == nil {
				unknown = "NVLink between the GPUs"
			} else {
				return false
			}
		}
		if c.p2p != nil && unknown == "" && (pf.P2P == nil || *pf.P2P != *c.p2p) {
			if pf.P2P == nil {
				unknown = "P2P between the GPUs"
			} else {
				return false
			}
		}
		for _, vc := range c.versions {
			if unknown != "" {
				break
			}
			v, err := source.ParseVersion(pf.Versions[vc.pkg])
			if pf.Versions[vc.pkg] == "" || err != nil {
				unknown = vc.pkg + " version"
				break
			}
			if !source.Satisfies(vc.cs, v) {
				return false
			}
		}
		if unknown != "" {
			if r.unknown == 0 {
				r.unknownFirst, r.unknownWhy = cell.ID, unknown
			}
			r.unknown++
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
			ok, unknown := false, ""
			for _, maj := range e.majors {
				v := e.verdict(pf, pv.name, maj)
				if slices.Contains(pv.want, v) {
					ok = true
				} else if v == probe.Unknown && unknown == "" {
					unknown = fmt.Sprintf("%s on SM %d", pv.name, maj)
				}
			}
			if !ok {
				if unknown != "" {
					if r.unknown == 0 {
						r.unknownFirst, r.unknownWhy = cell.ID, unknown
					}
					r.unknown++
				}
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

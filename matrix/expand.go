package matrix

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// maxTuples bounds the product walked before exclude, so that a typo in a
// matrix cannot make expansion run for hours.
const maxTuples = 1 << 24

// ExpandOptions change an expansion.
type ExpandOptions struct {
	// MaxCells overrides the file's max_cells (0: the file's, else 256).
	MaxCells int
	// RuleFiles are more rules files (--rules), after the built-in rules and
	// those the matrix names.
	RuleFiles []string
	// NoDefaultRules leaves out the built-in rules.
	NoDefaultRules bool
	// Probe holds facts from --probe-file; rules that read probe facts
	// cannot match without it.
	Probe *ProbeFacts
	// Shard selects part of the cells; the zero value means all of them.
	Shard Shard
	// CheckPatch, when set, is asked about every patch name a rule's
	// when.patches names (the catalog lookup, with its did-you-mean);
	// an error names the rules file and line.
	CheckPatch func(name string) error
	// PatchTP, when set, gives the tensor-parallel sizes a catalog patch
	// is for (its [requires] tp; nil for any) and the file that says so:
	// a cell with the patch at another TP is pruned, as by the matrix's
	// own [requires.PATCH] tp.
	PatchTP func(name string) (sizes []int, where string)
	// Context stops a long expansion (a signal): Expand returns its error.
	// Nil means none.
	Context context.Context
}

// Shard is part i of n (1-based) of the cells, in contiguous blocks.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ParseShard reads "i/n".
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return Shard{}, fmt.Errorf("--shard %q: want i/n with 1 <= i <= n", s)
	}
	return Shard{Index: i, Count: n}, nil
}

// Steps counts cells after each step of the expansion order.
type Steps struct {
	Product  int64 `json:"product"`  // the full cartesian product of the axes
	Zip      int   `json:"zip"`      // after zip groups
	Exclude  int   `json:"exclude"`  // after exclude
	Include  int   `json:"include"`  // after include (added and extended)
	Added    int   `json:"added"`    // cells include entries added
	Extended int   `json:"extended"` // cells include entries extended
	Pruned   int   `json:"pruned"`   // cells rules pruned
	Runnable int   `json:"runnable"` // cells left to run
	Warned   int   `json:"warned"`   // runnable cells with warnings
}

// ExcludeCount says how many cells one exclude entry removed.
type ExcludeCount struct {
	Where   string `json:"where"`
	Match   string `json:"match"` // the entry, as axis=value|value ...
	Removed int    `json:"removed"`
}

// Expansion is the result of Matrix.Expand.
type Expansion struct {
	Matrix *Matrix `json:"-"`
	// Cells are the cells of the selected shard in expansion order, pruned
	// ones included (with Pruned set).
	Cells []*Cell `json:"cells"`
	// Total is the number of cells over all shards.
	Total    int            `json:"total"`
	Steps    Steps          `json:"steps"`
	Excluded []ExcludeCount `json:"excluded"`
	Rules    []*Rule        `json:"rules"`
	// Baseline is the id of the baseline cell ("" when none is set).
	Baseline string   `json:"baseline,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	Shard    Shard    `json:"shard"`
	MaxCells int      `json:"max_cells"`

	ctx context.Context
}

// Runnable returns the cells no rule pruned.
func (x *Expansion) Runnable() []*Cell {
	var out []*Cell
	for _, c := range x.Cells {
		if c.Pruned == nil {
			out = append(out, c)
		}
	}
	return out
}

// Cell returns the cell with the given id in this shard.
func (x *Expansion) Cell(id string) *Cell {
	for _, c := range x.Cells {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// Expand runs the fixed expansion order: product → zip → exclude → include
// → rules, then gives ids, renders templates and selects the shard.
func (m *Matrix) Expand(opts ExpandOptions) (*Expansion, error) {
	x := &Expansion{Matrix: m, Shard: opts.Shard, ctx: opts.Context}
	if x.ctx == nil {
		x.ctx = context.Background()
	}
	limit := opts.MaxCells
	if limit <= 0 {
		if m.MaxCells > MaxFileCells {
			return nil, m.errf(m.line("max_cells"), "max_cells %d: a matrix file may ask for at most %d cells; pass --max-cells %d to expand more", m.MaxCells, MaxFileCells, m.MaxCells)
		}
		limit = m.MaxCells
	}
	if limit <= 0 {
		limit = DefaultMaxCells
	}
	x.MaxCells = limit

	rules, err := m.allRules(opts)
	if err != nil {
		return nil, err
	}
	x.Rules = rules

	cells, err := m.productCells(x, limit)
	if err != nil {
		return nil, err
	}
	if cells, err = m.applyIncludes(x, cells, limit); err != nil {
		return nil, err
	}

	if err := x.ctx.Err(); err != nil {
		return nil, err
	}
	if err := m.assignIDs(cells); err != nil {
		return nil, err
	}
	if err := x.ctx.Err(); err != nil {
		return nil, err
	}
	if err := m.render(x.ctx, cells); err != nil {
		return nil, err
	}
	if err := x.ctx.Err(); err != nil {
		return nil, err
	}

	if err := applyRules(m, x, rules, cells, opts.Probe); err != nil {
		return nil, err
	}

	if err := m.resolveBaseline(x, cells); err != nil {
		return nil, err
	}

	x.Total = len(cells)
	if opts.Shard.Count > 1 {
		lo := (opts.Shard.Index - 1) * len(cells) / opts.Shard.Count
		hi := opts.Shard.Index * len(cells) / opts.Shard.Count
		cells = cells[lo:hi]
	}
	x.Cells = cells
	return x, nil
}

// productCells runs product, zip and exclude and builds the cells kept.
func (m *Matrix) productCells(x *Expansion, limit int) ([]*Cell, error) {
	// product and zip: dims are single axes or zip groups, in axis order
	// (a group sits where its first axis is written).
	type dim struct {
		axes []int
		n    int
	}
	var dims []dim
	placed := map[int]bool{}
	x.Steps.Product = 1
	for ai, a := range m.Axes {
		x.Steps.Product = satMul(x.Steps.Product, int64(len(a.Values)))
		if placed[ai] {
			continue
		}
		d := dim{axes: []int{ai}, n: len(a.Values)}
		for _, g := range m.Zip {
			if slices.Contains(g, a.Name) {
				d.axes = nil
				for _, name := range g {
					d.axes = append(d.axes, m.axis[name])
					placed[m.axis[name]] = true
				}
			}
		}
		placed[ai] = true
		dims = append(dims, d)
	}
	zipped, approx := int64(1), 1.0
	for _, d := range dims {
		zipped = satMul(zipped, int64(d.n))
		approx *= float64(d.n)
	}
	if zipped > maxTuples {
		n := strconv.FormatInt(zipped, 10)
		if zipped == math.MaxInt64 {
			n = fmt.Sprintf("about %.3g", approx) // past int64: the exact count means nothing here
		}
		return nil, m.errf(0, "the axes make %s combinations; more than %d cannot be expanded: use zip groups or fewer values", n, maxTuples)
	}
	x.Steps.Zip = int(zipped)

	// exclude: per entry, per named axis, which value indexes match.
	type exAxis struct {
		ai int
		ok []bool
	}
	excl := make([][]exAxis, len(m.Exclude))
	for i, e := range m.Exclude {
		for _, name := range sortedKeys(e.Values) {
			ai := m.axis[name]
			ok := make([]bool, len(m.Axes[ai].Values))
			for vi, v := range m.Axes[ai].Values {
				for _, w := range e.Values[name] {
					if v.key() == w.key() {
						ok[vi] = true
					}
				}
			}
			excl[i] = append(excl[i], exAxis{ai, ok})
		}
	}
	removed := make([]int, len(m.Exclude))
	idx := make([]int, len(m.Axes))
	pos := make([]int, len(dims))
	var kept []int // len(m.Axes) value indexes per kept cell, back to back
	nk := 0
	for t := 0; t < x.Steps.Zip; t++ {
		if t&0xfff == 0 {
			if err := x.ctx.Err(); err != nil {
				return nil, err
			}
		}
		for di, d := range dims {
			for _, ai := range d.axes {
				idx[ai] = pos[di]
			}
		}
		out := false
		for i, e := range excl {
			all := true
			for _, ea := range e {
				if !ea.ok[idx[ea.ai]] {
					all = false
					break
				}
			}
			if all {
				removed[i]++
				out = true
				break
			}
		}
		if !out {
			if nk >= limit {
				return nil, m.errf(0, "more than %d cells after exclude: raise max_cells (in the file or with --max-cells) or exclude more", limit)
			}
			kept = append(kept, idx...)
			nk++
		}
		for di := len(dims) - 1; di >= 0; di-- {
			pos[di]++
			if pos[di] < dims[di].n {
				break
			}
			pos[di] = 0
		}
	}
	for i, e := range m.Exclude {
		x.Excluded = append(x.Excluded, ExcludeCount{Where: fmt.Sprintf("%s:%d", m.File, e.Line), Match: m.describeMatch(e), Removed: removed[i]})
		if removed[i] == 0 {
			x.Notes = append(x.Notes, fmt.Sprintf("%s:%d: exclude matches no cell", m.File, e.Line))
		}
	}
	x.Steps.Exclude = nk

	// Cells, their values and their env maps come from a few large
	// allocations: a 100k-cell matrix must expand in well under a second.
	na := len(m.Axes)
	info := m.valueInfos()
	cells := make([]*Cell, 0, nk)
	store := make([]Cell, nk)
	values := make([]AxisValue, nk*na)
	for i := range nk {
		id := kept[i*na : (i+1)*na : (i+1)*na]
		vals := values[i*na : (i+1)*na : (i+1)*na]
		for ai, a := range m.Axes {
			vals[ai] = AxisValue{Axis: a.Name, Value: a.Values[id[ai]]}
		}
		c := &store[i]
		m.fillCell(c, vals, id, "product", info)
		cells = append(cells, c)
	}

	return cells, nil
}

// applyIncludes runs the include entries in order over the cells.
func (m *Matrix) applyIncludes(x *Expansion, cells []*Cell, limit int) ([]*Cell, error) {
	// include
	// Cells by their values, for include entries that name every axis.
	var byKey map[string]*Cell
	for _, inc := range m.Include {
		if len(inc.Values) == len(m.Axes) && byKey == nil {
			byKey = make(map[string]*Cell, len(cells))
			for _, c := range cells {
				byKey[cellKey(c)] = c
			}
		}
	}
	extended := map[*Cell]bool{}
	for _, inc := range m.Include {
		if err := x.ctx.Err(); err != nil {
			return nil, err
		}
		where := fmt.Sprintf("%s:%d", m.File, inc.Line)
		var matched []*Cell
		if len(inc.Values) == len(m.Axes) {
			vals := make([]AxisValue, len(m.Axes))
			for ai, a := range m.Axes {
				vals[ai] = AxisValue{Axis: a.Name, Value: inc.Values[a.Name]}
			}
			probe := &Cell{Values: vals}
			if c, ok := byKey[cellKey(probe)]; ok {
				matched = []*Cell{c}
			} else {
				if len(cells) >= limit {
					return nil, m.errf(inc.Line, "include adds a cell beyond max_cells %d", limit)
				}
				id := make([]int, len(m.Axes))
				for ai, a := range m.Axes {
					id[ai] = -1
					for vi, v := range a.Values {
						if v.key() == vals[ai].key() {
							id[ai] = vi
							vals[ai].Value = v // the axis's own form (512, not "512")
						}
					}
				}
				c := &Cell{}
				m.fillCell(c, vals, id, "include "+where, nil)
				cells = append(cells, c)
				byKey[cellKey(c)] = c
				x.Steps.Added++
				if err := m.extend(c, inc, where); err != nil {
					return nil, err
				}
				c.Extended = nil // its own include, already its origin
				continue
			}
		} else {
			for _, c := range cells {
				if includeMatches(c, inc, m) {
					matched = append(matched, c)
				}
			}
			if len(matched) == 0 {
				return nil, m.errf(inc.Line, "include names only some axes and matches no cell; name every axis to add a cell")
			}
		}
		if len(inc.Env) == 0 && len(inc.Args) == 0 && inc.ID == "" {
			x.Notes = append(x.Notes, fmt.Sprintf("%s: include names a cell that exists and adds nothing to it", where))
		}
		for _, c := range matched {
			if err := m.extend(c, inc, where); err != nil {
				return nil, err
			}
			if len(inc.Env) > 0 || len(inc.Args) > 0 {
				extended[c] = true
			}
		}
	}
	x.Steps.Extended = len(extended)
	x.Steps.Include = len(cells)

	return cells, nil
}

// applyRules evaluates every rule on every cell, in rule order; the first
// prune ends a cell's evaluation.
func applyRules(m *Matrix, x *Expansion, rules []*Rule, cells []*Cell, pf *ProbeFacts) error {
	// rules
	evals, ft := prepareRules(m, rules, cells)
	var probeMajors []int
	if pf != nil {
		probeMajors = pf.majors()
	}
	e := evalCell{ft: ft}
	majorOf := map[string][]int{}
	// Decisions: one per rule, shared by the cells it prunes; warnings are
	// copied into chunks so that cells do not grow slices one by one.
	decisions := make([]Decision, len(evals))
	for i, r := range evals {
		decisions[i] = Decision{Rule: r.Name, Action: r.Action, Reason: r.Reason, Source: r.Source, Where: r.Where}
	}
	var scratch, chunk []Decision
	warnText := 0 // the rules' text the cells' warnings carry, together
	for ci, c := range cells {
		if ci%256 == 0 {
			if err := x.ctx.Err(); err != nil {
				return err
			}
		}
		e.reset(c)
		e.majors = probeMajors
		if c.SM != "" {
			if e.majors = majorOf[c.SM]; e.majors == nil {
				maj, _, _ := parseSM(c.SM)
				e.majors = []int{maj}
				majorOf[c.SM] = e.majors
			}
		}
		scratch = scratch[:0]
		for i, r := range evals {
			if !r.match(&e, pf) {
				continue
			}
			switch r.Action {
			case "prune":
				c.Pruned = &decisions[i]
			case "warn":
				scratch = append(scratch, decisions[i])
			case "require-flag":
				e.loadFlags()
				if !e.fset[r.flag] {
					d := decisions[i]
					d.Flag = r.Flag
					c.Args = append(c.Args, r.Flag)
					c.Command = append(c.Command, r.Flag)
					e.fset[r.flag], e.fv[r.flag] = true, ""
					scratch = append(scratch, d)
				}
			}
			if c.Pruned != nil {
				break
			}
		}
		if len(scratch) > 0 {
			if cap(chunk)-len(chunk) < len(scratch) {
				chunk = make([]Decision, 0, max(4096, len(scratch)))
			}
			n := len(chunk)
			chunk = append(chunk, scratch...)
			c.Warnings = chunk[n:len(chunk):len(chunk)]
			for _, d := range scratch {
				warnText += len(d.Rule) + len(d.Reason) + len(d.Source) + len(d.Where)
			}
			if warnText > MaxExpansionText {
				// Every warning is written out per cell (run.sh,
				// index.json, --json): bounded like the cells' own text.
				return fmt.Errorf("%s: %w: the rules' warnings on the cells hold more than %d MiB of text (cell %s)", m.File, ErrTooMuch, MaxExpansionText>>20, c.ID)
			}
		}
		if c.Pruned != nil {
			x.Steps.Pruned++
		} else {
			x.Steps.Runnable++
			if len(c.Warnings) > 0 {
				x.Steps.Warned++
			}
		}
	}

	for _, r := range evals {
		if r.unprobed > 0 {
			x.Notes = append(x.Notes, fmt.Sprintf("rule %s (%s) reads probe facts and was not checked on %d cell(s), first %s: give --probe-file", r.Name, r.Where, r.unprobed, r.first))
		}
		if r.unknown > 0 {
			x.Notes = append(x.Notes, fmt.Sprintf("rule %s (%s) could not be judged on %d cell(s), first %s: the probe report says unknown for %s", r.Name, r.Where, r.unknown, r.unknownFirst, r.unknownWhy))
		}
	}
	return x.ctx.Err()
}

// describeMatch shows an exclude entry as "nccl=default|tree
// patches=[sm120-fusion]", in axis order.
func (m *Matrix) describeMatch(x *Match) string {
	var parts []string
	for _, a := range m.Axes {
		vals, ok := x.Values[a.Name]
		if !ok {
			continue
		}
		var vs []string
		for _, v := range vals {
			vs = append(vs, v.Shown())
		}
		parts = append(parts, a.Name+"="+strings.Join(vs, "|"))
	}
	return strings.Join(parts, " ")
}

// CountString writes a count that satMul may have saturated: the number, or
// "more than 9223372036854775806" when it no longer fits.
func CountString(n int64) string {
	if n == math.MaxInt64 {
		return fmt.Sprintf("more than %d", int64(math.MaxInt64-1))
	}
	return strconv.FormatInt(n, 10)
}

func satMul(a, b int64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

func (m *Matrix) allRules(opts ExpandOptions) ([]*Rule, error) {
	rules := append([]*Rule{}, m.requireRules...)
	if opts.PatchTP != nil {
		rules = append(rules, m.catalogTPRules(opts.PatchTP)...)
	}
	if !opts.NoDefaultRules {
		d, err := DefaultRules(m)
		if err != nil {
			return nil, err
		}
		rules = append(rules, d...)
	}
	rules = append(rules, m.rules...)
	for _, f := range opts.RuleFiles {
		r, err := LoadRules(f, m)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r...)
	}
	if opts.CheckPatch != nil {
		for _, r := range rules {
			for _, p := range r.when.patches {
				if err := opts.CheckPatch(p); err != nil {
					where := r.Where
					if r.when.patchesLine > 0 {
						where = fmt.Sprintf("%s:%d", r.file, r.when.patchesLine)
					}
					return nil, fmt.Errorf("%s: rule %q: when.patches: %v", where, r.Name, err)
				}
			}
		}
	}
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("%s: more than %d rules in all (built-in, the matrix's rules files, --rules): each is tried on every cell", rules[MaxRules].Where, MaxRules)
	}
	seen := map[string]string{}
	for _, r := range rules {
		if w, dup := seen[r.Name]; dup {
			return nil, fmt.Errorf("%s: rule %q is already defined at %s", r.Where, r.Name, w)
		}
		seen[r.Name] = r.Where
	}
	return rules, nil
}

// valueInfo is what an axis value contributes to a cell.
type valueInfo struct {
	preset *Preset
	sm     string
	tp     int
}

func (m *Matrix) valueInfo(a *Axis, v Value) valueInfo {
	var vi valueInfo
	if a.Presets {
		vi.preset = m.Presets[a.Name][v.Text]
	}
	if a.Name == m.ArchAxis {
		maj, min, _ := parseSM(v.Text)
		vi.sm = fmt.Sprintf("%d.%d", maj, min)
	}
	if a.Name == "tp" {
		if n, err := strconv.Atoi(v.Text); err == nil && n > 0 {
			vi.tp = n
		}
	}
	return vi
}

// valueInfos computes valueInfo for every axis value, by axis and index.
func (m *Matrix) valueInfos() [][]valueInfo {
	out := make([][]valueInfo, len(m.Axes))
	for ai, a := range m.Axes {
		out[ai] = make([]valueInfo, len(a.Values))
		for vi, v := range a.Values {
			out[ai][vi] = m.valueInfo(a, v)
		}
	}
	return out
}

// fillCell sets up a cell from its values: patches, preset env and flags,
// GPU architecture and tp. info caches valueInfo by value index (nil: none).
func (m *Matrix) fillCell(c *Cell, vals []AxisValue, idx []int, origin string, info [][]valueInfo) {
	*c = Cell{Values: vals, Patches: []string{}, Origin: origin, idx: idx}
	envN, argN := len(m.Launch.Env), 0
	infos := make([]valueInfo, 0, 4)
	for ai, a := range m.Axes {
		var vi valueInfo
		if info != nil && idx[ai] >= 0 {
			vi = info[ai][idx[ai]]
		} else {
			vi = m.valueInfo(a, vals[ai].Value)
		}
		if a.Name == PatchesAxis {
			c.Patches = vals[ai].List
		}
		if vi.preset != nil {
			envN += len(vi.preset.Env)
			argN += len(vi.preset.Args)
			infos = append(infos, vi)
		}
		if vi.sm != "" {
			c.SM = vi.sm
		}
		if vi.tp != 0 {
			c.TP = vi.tp
		}
	}
	c.Env = make(map[string]string, envN)
	if argN > 0 {
		c.Args = make([]string, 0, argN)
	}
	for _, vi := range infos {
		for k, e := range vi.preset.Env {
			c.Env[k] = e
		}
		c.Args = append(c.Args, vi.preset.Args...)
	}
}

// cellKey identifies a cell by its values (patch sets as sets).
func cellKey(c *Cell) string {
	var b strings.Builder
	for _, v := range c.Values {
		b.WriteString(v.key())
		b.WriteByte(0x1f)
	}
	return b.String()
}

func includeMatches(c *Cell, inc *Include, m *Matrix) bool {
	for name, v := range inc.Values {
		if c.Values[m.axis[name]].key() != v.key() {
			return false
		}
	}
	return true
}

// extend adds an include entry's env and args to a cell; a different value
// for something the cell already sets is an error, never an overwrite.
func (m *Matrix) extend(c *Cell, inc *Include, where string) error {
	if len(inc.Env) == 0 && len(inc.Args) == 0 {
		return nil
	}
	for _, k := range sortedKeys(inc.Env) {
		if _, ok := m.Launch.Env[k]; ok {
			return m.errf(inc.Line, "include sets %s, which launch.env already sets", k)
		}
		if old, ok := c.Env[k]; ok && old != inc.Env[k] {
			return m.errf(inc.Line, "include sets %s=%s but cell %s already has %s=%s", k, inc.Env[k], describe(c), k, old)
		}
		c.Env[k] = inc.Env[k]
	}
	add := flagMap(inc.Args)
	flagOf := func(f string) (string, bool) {
		if v, ok := argValue(c.Args, f); ok {
			return v, true
		}
		return argValue(m.Launch.Command, f)
	}
	for _, f := range sortedKeys(add) {
		if old, ok := flagOf(f); ok && old != add[f] {
			return m.errf(inc.Line, "include sets %s %s but cell %s already has %s %s", f, add[f], describe(c), f, old)
		}
	}
	for i := 0; i < len(inc.Args); i++ {
		a := inc.Args[i]
		f, _, _ := strings.Cut(a, "=")
		if _, ok := flagOf(f); ok && strings.HasPrefix(a, "--") {
			// Same flag, same value: already there. Skip its value too.
			if !strings.Contains(a, "=") && i+1 < len(inc.Args) && !strings.HasPrefix(inc.Args[i+1], "--") {
				i++
			}
			continue
		}
		c.Args = append(c.Args, a)
	}
	c.Extended = append(c.Extended, "include "+where)
	return nil
}

// argValue finds flag in args ("--f v", "--f=v", bare "--f" gives "").
func argValue(args []string, flag string) (string, bool) {
	for i, a := range args {
		if !strings.HasPrefix(a, flag) {
			continue
		}
		if a == flag {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				return args[i+1], true
			}
			return "", true
		}
		if a[len(flag)] == '=' {
			return a[len(flag)+1:], true
		}
	}
	return "", false
}

func describe(c *Cell) string {
	if c.ID != "" {
		return c.ID
	}
	var parts []string
	for _, v := range c.Values {
		parts = append(parts, v.Axis+"="+v.Shown())
	}
	return strings.Join(parts, " ")
}

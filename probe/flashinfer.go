package probe

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/internal/smver"
)

// fiTree is one flashinfer installation or checkout on an fs.FS. pkg is the
// package directory (".../flashinfer"), base the directory that paths in the
// report are relative to (site-packages, or the checkout root).
type fiTree struct {
	fsys    fs.FS
	pkg     string
	base    string
	layout  string // "wheel" or "source"
	include string // comm headers directory
	csrc    string
}

// findFlashInfer looks for the flashinfer package under each directory:
// DIR/flashinfer/jit marks it. A checkout root works as well as
// site-packages (its include/ sits beside the package).
func findFlashInfer(fsys fs.FS, dirs []string) (*fiTree, bool) {
	for _, d := range dirs {
		d = fsPath(d)
		pkg := path.Join(d, "flashinfer")
		if !isDir(fsys, path.Join(pkg, "jit")) {
			continue
		}
		t := &fiTree{fsys: fsys, pkg: pkg, base: d}
		switch {
		case isDir(fsys, path.Join(pkg, "data", "include")):
			t.layout = "wheel"
			t.include = path.Join(pkg, "data", "include", "flashinfer", "comm")
			t.csrc = path.Join(pkg, "data", "csrc")
		case isDir(fsys, path.Join(d, "include", "flashinfer")):
			t.layout = "source"
			t.include = path.Join(d, "include", "flashinfer", "comm")
			t.csrc = path.Join(d, "csrc")
		default:
			t.layout = "wheel"
			t.include = path.Join(pkg, "data", "include", "flashinfer", "comm")
			t.csrc = path.Join(pkg, "data", "csrc")
		}
		return t, true
	}
	return nil, false
}

func fsPath(p string) string {
	p = strings.TrimPrefix(path.Clean("/"+strings.ReplaceAll(p, "\\", "/")), "/")
	if p == "" {
		return "."
	}
	return p
}

func isDir(fsys fs.FS, p string) bool {
	fi, err := fs.Stat(fsys, p)
	return err == nil && fi.IsDir()
}

func (t *fiTree) rel(p string) string {
	if t.base == "." {
		return p
	}
	return strings.TrimPrefix(p, t.base+"/")
}

// analyzeFlashInfer reads the tree's JIT generators, comm headers and
// compilation context while ctx lasts. Nothing is imported or run.
func analyzeFlashInfer(ctx context.Context, t *fiTree, r *Report) *FlashInfer {
	fi := &FlashInfer{
		Root:             "/" + strings.TrimPrefix(t.pkg, "./"),
		Layout:           t.layout,
		Modules:          map[string]*Module{},
		HeaderExclusions: []HeaderExclusion{},
	}
	fi.Version, fi.VersionFrom = t.version()
	if fi.Version == "" {
		r.unknown("flashinfer.version", "no flashinfer/_build_meta.py __version__, no version.txt beside the package")
	}
	// Generators: flashinfer/jit/**/*.py, and flashinfer/comm/*.py (older trees
	// kept gen_trtllm_comm_module in flashinfer/comm/trtllm_ar.py).
	var files []string
	_ = fs.WalkDir(t.fsys, path.Join(t.pkg, "jit"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".py") {
			files = append(files, p)
		}
		return nil
	})
	if ents, err := fs.ReadDir(t.fsys, path.Join(t.pkg, "comm")); err == nil {
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".py") {
				files = append(files, path.Join(t.pkg, "comm", e.Name()))
			}
		}
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := fs.ReadFile(t.fsys, f)
		if err != nil {
			r.unknown("flashinfer."+t.rel(f), err.Error())
			continue
		}
		mods, err := ParseGenerators(ctx, t.rel(f), data)
		if err != nil {
			r.unknown("flashinfer."+t.rel(f), err.Error())
			continue
		}
		for name, m := range mods {
			if old, ok := fi.Modules[name]; ok && old.Source < m.Source {
				continue
			}
			fi.Modules[name] = m
		}
	}
	// Headers each module's sources include, each source read once.
	memo := map[string][]string{}
	for _, m := range fi.Modules {
		m.Headers = t.moduleHeaders(m.Sources, memo)
	}
	// Comm header exclusions.
	if ents, err := fs.ReadDir(t.fsys, t.include); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				continue
			}
			p := path.Join(t.include, e.Name())
			data, err := fs.ReadFile(t.fsys, p)
			if err != nil {
				continue
			}
			fi.HeaderExclusions = append(fi.HeaderExclusions, ParseHeaderExclusions(t.rel(p), data)...)
		}
	} else {
		r.unknown("flashinfer.header_exclusions", "no comm headers at "+"/"+t.include)
	}
	// SM 12.x CUDA minimum.
	cc := path.Join(t.pkg, "compilation_context.py")
	if data, err := fs.ReadFile(t.fsys, cc); err == nil {
		if v, line := ParseSM12CUDAMin(data); v != "" {
			fi.SM12CUDAMin, fi.SM12CUDAMinFrom = v, fmt.Sprintf("%s:%d", t.rel(cc), line)
		}
	}
	return fi
}

// version reads _build_meta.py (wheel) or version.txt (checkout).
func (t *fiTree) version() (string, string) {
	p := path.Join(t.pkg, "_build_meta.py")
	if data, err := fs.ReadFile(t.fsys, p); err == nil {
		if m := buildMetaRe().FindSubmatch(data); m != nil {
			return string(m[1]), t.rel(p)
		}
	}
	p = path.Join(path.Dir(t.pkg), "version.txt")
	if data, err := fs.ReadFile(t.fsys, p); err == nil {
		if v := strings.TrimSpace(string(data)); v != "" && !strings.ContainsAny(v, "\n ") {
			return v, t.rel(p)
		}
	}
	return "", ""
}

var buildMetaRe = lazyre.New(`(?m)^__version__\s*=\s*["']([^"']+)["']`)

// moduleHeaders maps a module's .cu sources to the comm headers they use:
// the header of the same name, and the flashinfer/comm includes of the
// source when it is present; memo keeps what each source gave.
func (t *fiTree) moduleHeaders(sources []string, memo map[string][]string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(h string) {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	for _, s := range sources {
		hs, ok := memo[path.Base(s)]
		if !ok {
			base := strings.TrimSuffix(path.Base(s), ".cu")
			if _, err := fs.Stat(t.fsys, path.Join(t.include, base+".cuh")); err == nil {
				hs = append(hs, base+".cuh")
			}
			if data, err := fs.ReadFile(t.fsys, path.Join(t.csrc, path.Base(s))); err == nil {
				for _, m := range commIncludeRe().FindAllSubmatch(data, -1) {
					hs = append(hs, string(m[1]))
				}
			}
			memo[path.Base(s)] = hs
		}
		for _, h := range hs {
			add(h)
		}
	}
	sort.Strings(out)
	return out
}

var commIncludeRe = lazyre.New(`#include\s*[<"]flashinfer/comm/([^">]+)[">]`)

var (
	defRe           = lazyre.New(`^def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
	constListRe     = lazyre.New(`(?m)^([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]+)?=\s*(\[[^\]]*\])`)
	callNameRe      = lazyre.New(`\b([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
	smFlagsRe       = lazyre.New(`\bsm(\d+)([af]?)_nvcc_flags\b`)
	gencodeRe       = lazyre.New(`code=sm_(\d+)([af]?)`)
	cuSourceRe      = lazyre.New(`["']([A-Za-z0-9_./-]+\.cu)["']`)
	nvccFlagsCallRe = lazyre.New(`get_nvcc_flags_list\s*\(`)
	genJitSpecRe    = lazyre.New(`\bgen_jit_spec\s*\(`)
)

type pyFunc struct {
	name  string
	line  int // 1-based line of "def"
	lines []string
}

// splitFuncs cuts a Python file into its top-level functions.
func splitFuncs(src string) []pyFunc {
	lines := strings.Split(src, "\n")
	var funcs []pyFunc
	cur := -1
	for i, l := range lines {
		if m := defRe().FindStringSubmatch(l); m != nil {
			funcs = append(funcs, pyFunc{name: m[1], line: i + 1})
			cur = len(funcs) - 1
			funcs[cur].lines = append(funcs[cur].lines, l)
			continue
		}
		if cur >= 0 && l != "" && l[0] != ' ' && l[0] != '\t' && l[0] != '#' && l[0] != ')' && l[0] != ']' && l[0] != '"' && l[0] != '\'' {
			cur = -1
		}
		if cur >= 0 {
			funcs[cur].lines = append(funcs[cur].lines, l)
		}
	}
	return funcs
}

// stripComment drops a trailing # comment (outside string literals).
func stripComment(l string) string {
	end := len(l)
	walkCode(l, 0, func(i int, c byte, _ int) bool {
		if c == '#' {
			end = i
			return false
		}
		return true
	})
	return l[:end]
}

// walkCode calls fn for every byte of s from index from on that lies outside
// a Python string literal, with the bracket depth after that byte; fn
// returns false to stop the walk.
func walkCode(s string, from int, fn func(i int, c byte, depth int) bool) {
	depth := 0
	inS := byte(0)
	for i := from; i < len(s); i++ {
		c := s[i]
		if inS != 0 {
			if c == '\\' {
				i++
			} else if c == inS {
				inS = 0
			}
			continue
		}
		switch c {
		case '"', '\'':
			inS = c
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		}
		if !fn(i, c, depth) {
			return
		}
	}
}

// closers gives, for each offset of opens (ascending, each an opening
// bracket of body), the offset of the bracket that closes it, -1 where none
// does or where the offset lies in a string literal (a call in a string is
// not a call): one walk of body for all of them.
func closers(body string, opens []int) []int {
	out := make([]int, len(opens))
	for i := range out {
		out[i] = -1
	}
	var stack []int // for each open bracket, its index in opens or -1
	k := 0
	walkCode(body, 0, func(i int, c byte, _ int) bool {
		for k < len(opens) && opens[k] < i {
			k++ // in a string literal
		}
		switch c {
		case '(', '[', '{':
			w := -1
			if k < len(opens) && opens[k] == i {
				w, k = k, k+1
			}
			stack = append(stack, w)
		case ')', ']', '}':
			if n := len(stack); n > 0 {
				if w := stack[n-1]; w >= 0 {
					out[w] = i
				}
				stack = stack[:n-1]
			}
		}
		return true
	})
	return out
}

type gateCall struct {
	majors []int
	kind   string // "list", "all", "unresolved"
	line   int    // line in the file
	text   string
}

// ParseGenerators finds the JIT module generators of one Python file and the
// gate each passes. file is the path reported in "file:line". Its time is
// linear in the file (each bracket is matched in one walk, each call's
// arguments are read within a budget of the function's size, at most
// maxGates gate calls a function), and it stops with ctx's error when ctx
// ends.
func ParseGenerators(ctx context.Context, file string, data []byte) (map[string]*Module, error) {
	src := string(data)
	consts := map[string][]int{}
	for _, m := range constListRe().FindAllStringSubmatch(src, -1) {
		if ints, ok := parseIntList(m[2]); ok {
			consts[m[1]] = ints
		}
	}
	funcs := splitFuncs(src)
	infos := map[string]*funcInfo{}
	for _, f := range funcs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		infos[f.name] = readFunc(f, consts)
	}
	out := map[string]*Module{}
	for _, f := range funcs {
		if !strings.HasPrefix(f.name, "gen_") {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		in := infos[f.name]
		gates := append([]gateCall(nil), in.gates...)
		// One level of same-file helpers (a _arch_flags() that holds the
		// gate), each helper once, at most maxGates gates in all.
		for _, c := range dedup(in.calls) {
			if h, ok := infos[c]; ok && c != f.name && !strings.HasPrefix(c, "gen_") {
				gates = append(gates, h.gates[:min(len(h.gates), maxGates-min(len(gates), maxGates))]...)
			}
		}
		if len(gates) == 0 && in.specLine == 0 {
			continue // not a generator
		}
		m := generatorModule(file, f, in, gates)
		names := dedup(in.names)
		if len(names) == 0 {
			names = []string{strings.TrimSuffix(strings.TrimPrefix(f.name, "gen_"), "_module")}
		}
		for _, n := range names {
			mm := *m
			out[n] = &mm
		}
	}
	return out, nil
}

// maxGates bounds the gate calls read of one function (flashinfer's have
// one to three).
const maxGates = 64

// funcInfo is what one Python function says about the modules it builds.
type funcInfo struct {
	gates        []gateCall
	names        []string // gen_jit_spec names
	sources      []string // .cu files
	calls        []string // functions it calls
	explicit     []string // fixed targets in extra_cuda_cflags ("sm_100a")
	explicitLine int
	conditional  bool
	specLine     int
	note         string
}

// readFunc reads f's gates, gen_jit_spec calls and what else it uses,
// without its comments.
func readFunc(f pyFunc, consts map[string][]int) *funcInfo {
	in := &funcInfo{}
	var b strings.Builder
	starts := make([]int, 0, len(f.lines)) // offset of each line
	for _, l := range f.lines {
		starts = append(starts, b.Len())
		b.WriteString(stripComment(l))
		b.WriteByte('\n')
	}
	body := b.String()
	line := func(off int) int {
		return f.line + sort.SearchInts(starts, off+1) - 1
	}
	// The arguments of every call are found in one walk; reading them is
	// bounded by a budget of the body's size, so calls nested in calls
	// cannot make the reading quadratic.
	budget := 2*len(body) + 64<<10
	gates := nvccFlagsCallRe().FindAllStringIndex(body, -1)
	if len(gates) > maxGates {
		gates = gates[:maxGates]
	}
	specs := genJitSpecRe().FindAllStringIndex(body, -1)
	opens := make([]int, 0, len(gates)+len(specs))
	for _, loc := range append(append([][]int(nil), gates...), specs...) {
		opens = append(opens, loc[1]-1)
	}
	sort.Ints(opens)
	ends := closers(body, opens)
	args := func(open int) (string, string) {
		k := sort.SearchInts(opens, open)
		switch {
		case k >= len(ends) || ends[k] < 0:
			return "", "the call does not close"
		case ends[k]-open-1 > budget:
			return "", "calls nested past what the probe reads of one function"
		}
		budget -= ends[k] - open - 1
		return body[open+1 : ends[k]], ""
	}
	for _, loc := range gates {
		in.gates = append(in.gates, readGate(loc, args, consts, line))
	}
	for _, loc := range specs {
		if in.specLine == 0 {
			in.specLine = line(loc[0])
		}
		if a, why := args(loc[1] - 1); why == "" {
			in.readSpec(a, loc[1], line)
		}
	}
	for _, m := range callNameRe().FindAllStringSubmatch(body, -1) {
		in.calls = append(in.calls, m[1])
	}
	if strings.Contains(body, "_get_cuda_arch_flags") {
		in.note = joinNote(in.note, "reads torch _get_cuda_arch_flags()")
	}
	if strings.Contains(body, "get_device_capability") {
		in.note = joinNote(in.note, "reads torch.cuda.get_device_capability()")
	}
	return in
}

// readGate reads the get_nvcc_flags_list call at loc in body: its
// supported_major_versions, a list or a constant of the file.
func readGate(loc []int, callArgs func(open int) (string, string), consts map[string][]int, line func(int) int) gateCall {
	open := loc[1] - 1
	args, why := callArgs(open)
	g := gateCall{line: line(loc[0])}
	if why != "" {
		g.kind, g.text = "unresolved", why
		return g
	}
	i := strings.Index(args, "supported_major_versions")
	if i < 0 {
		// A positional first argument is the list too.
		first, _, _ := strings.Cut(args, ",")
		first = strings.TrimSpace(first)
		if strings.HasPrefix(first, "[") {
			if ints, ok := parseIntList(listAt(args, strings.Index(args, "["))); ok {
				g.kind, g.majors = "list", ints
				return g
			}
		}
		g.kind = "all"
		return g
	}
	g.line = line(open + 1 + i)
	rest := strings.TrimSpace(args[i+len("supported_major_versions"):])
	rest = strings.TrimSpace(strings.TrimPrefix(rest, "="))
	switch {
	case strings.HasPrefix(rest, "["):
		lst := listAt(rest, 0)
		g.text = "supported_major_versions=" + compactSpace(lst)
		if ints, ok := parseIntList(lst); ok {
			g.kind, g.majors = "list", ints
		} else {
			g.kind = "unresolved"
		}
	case strings.HasPrefix(rest, "None"):
		g.kind = "all"
		g.text = "supported_major_versions=None"
	default:
		name := identAt(rest)
		g.text = "supported_major_versions=" + name
		if ints, ok := consts[name]; ok {
			g.kind, g.majors = "list", ints
		} else {
			g.kind = "unresolved"
		}
	}
	return g
}

// readSpec reads the arguments of a gen_jit_spec call that starts at
// offset at: the module's name, its .cu sources and the fixed targets of
// its extra_cuda_cflags.
func (in *funcInfo) readSpec(args string, at int, line func(int) int) {
	first := strings.TrimSpace(splitTopLevel(args)[0])
	if len(first) >= 2 && (first[0] == '"' || first[0] == '\'') && first[len(first)-1] == first[0] && !strings.ContainsAny(first[1:len(first)-1], "{}\"'") {
		in.names = append(in.names, first[1:len(first)-1])
	}
	for _, m := range cuSourceRe().FindAllStringSubmatch(args, -1) {
		in.sources = append(in.sources, m[1])
	}
	j := strings.Index(args, "extra_cuda_cflags")
	if j < 0 {
		return
	}
	expr := args[j:]
	for _, re := range []func() *regexp.Regexp{smFlagsRe, gencodeRe} {
		for _, m := range re().FindAllStringSubmatch(expr, -1) {
			if a, err := smver.ParseArch("sm_" + m[1] + m[2]); err == nil {
				in.explicit = append(in.explicit, a.Target())
			}
		}
	}
	if len(in.explicit) > 0 {
		in.explicitLine = line(at + j)
		stmt := strings.SplitN(expr, "\n", 2)[0]
		in.conditional = strings.Contains(stmt, " if ")
		in.note = "extra_cuda_cflags=" + strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(stmt, "extra_cuda_cflags=")), ",")
	}
}

// generatorModule is the module the generator f builds, gated by gates
// (its own and its helpers').
func generatorModule(file string, f pyFunc, in *funcInfo, gates []gateCall) *Module {
	m := &Module{Generator: f.name, Sources: dedup(in.sources)}
	switch {
	case len(gates) == 0 && len(in.explicit) > 0:
		m.Gate = "explicit"
		m.Explicit = dedup(in.explicit)
		m.Source = fmt.Sprintf("%s:%d", file, in.explicitLine)
		m.Note = "no supported_major_versions gate; " + in.note
		if in.conditional {
			m.Note += " (conditional)"
		}
		m.Conditional = in.conditional
	case len(gates) == 0:
		m.Gate = "none"
		m.Source = fmt.Sprintf("%s:%d", file, f.line)
		m.Note = "no supported_major_versions gate: builds for every target arch"
		if in.note != "" {
			m.Note += "; uses " + strings.TrimSpace(in.note)
		}
	default:
		g := gates[0]
		m.Source = fmt.Sprintf("%s:%d", file, g.line)
		m.Gate = map[string]string{"list": "supported_major_versions", "all": "all", "unresolved": "unresolved"}[g.kind]
		m.SMMajors = g.majors
		if g.kind == "unresolved" {
			m.Note = "gate argument not read: " + g.text
		}
		if g.kind == "all" {
			m.Note = "get_nvcc_flags_list without a major list: every target arch"
		}
		if len(gates) > 1 {
			for _, g := range gates {
				m.Gates = append(m.Gates, GateSite{SMMajors: g.majors, Source: fmt.Sprintf("%s:%d", file, g.line)})
			}
		}
	}
	return m
}

func listAt(s string, i int) string {
	if i < 0 || i >= len(s) {
		return ""
	}
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				return s[i : j+1]
			}
		}
	}
	return s[i:]
}

func identAt(s string) string {
	for i, c := range s {
		if !(c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return s[:i]
		}
	}
	return s
}

func compactSpace(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "[ ", "[")
	s = strings.ReplaceAll(s, ", ]", "]")
	s = strings.ReplaceAll(s, ",]", "]")
	return strings.ReplaceAll(s, " ]", "]")
}

// parseIntList reads "[9, 10, 12]" (spaces, newlines and a trailing comma allowed).
func parseIntList(s string) ([]int, bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return nil, false
	}
	var out []int
	for _, p := range strings.Split(s[1:len(s)-1], ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// splitTopLevel splits call arguments at top-level commas.
func splitTopLevel(s string) []string {
	var out []string
	start := 0
	walkCode(s, 0, func(i int, c byte, depth int) bool {
		if c == ',' && depth == 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
		return true
	})
	return append(out, s[start:])
}

func dedup(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

var (
	ppCondRe  = lazyre.New(`^\s*#\s*(if|elif)\b(.*)$`)
	archLtRe  = lazyre.New(`__CUDA_ARCH__\s*(<=?)\s*(\d+)`)
	archGeRe  = lazyre.New(`__CUDA_ARCH__\s*(>=?)\s*(\d+)`)
	sm12MinRe = lazyre.New(`SM 12\.x requires CUDA >= (\d+(?:\.\d+)*)`)
)

// ParseHeaderExclusions finds preprocessor conditions that compile code out
// above an architecture: `__CUDA_ARCH__ < N` inside a window with a lower
// bound, or any upper bound at or above sm_100 (a fallback branch for old
// GPUs, `__CUDA_ARCH__ < 800`, is not an exclusion).
func ParseHeaderExclusions(file string, data []byte) []HeaderExclusion {
	var out []HeaderExclusion
	for i, l := range strings.Split(string(data), "\n") {
		m := ppCondRe().FindStringSubmatch(l)
		if m == nil {
			continue
		}
		cond := m[2]
		lt := archLtRe().FindStringSubmatch(cond)
		if lt == nil {
			continue
		}
		n, err := strconv.Atoi(lt[2])
		if err != nil {
			continue
		}
		if lt[1] == "<=" {
			n++
		}
		if n < 1000 && !archGeRe().MatchString(cond) {
			continue
		}
		from := n / 100
		if n%100 != 0 {
			from++
		}
		out = append(out, HeaderExclusion{File: file, Line: i + 1, Text: strings.TrimSpace(l), FromMajor: from})
	}
	return out
}

// ParseSM12CUDAMin finds `SM 12.x requires CUDA >= X` in compilation_context.py.
func ParseSM12CUDAMin(data []byte) (string, int) {
	for i, l := range strings.Split(string(data), "\n") {
		if m := sm12MinRe().FindStringSubmatch(l); m != nil {
			return m[1], i + 1
		}
	}
	return "", 0
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + ", " + b
}

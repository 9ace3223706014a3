package matrix

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/probe"
)

const launch = `
[launch]
command = ["serve", "--port", "30000"]
`

func mustParse(t *testing.T, src string) *Matrix {
	t.Helper()
	m, err := Parse("m.toml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

func expand(t *testing.T, src string, opts ExpandOptions) *Expansion {
	t.Helper()
	x, err := mustParse(t, src).Expand(opts)
	if err != nil {
		t.Fatalf("Expand: %v", err)
	}
	return x
}

func ids(x *Expansion) []string {
	var out []string
	for _, c := range x.Cells {
		out = append(out, c.ID)
	}
	return out
}

func TestExpandSteps(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "product in axis order, first axis slowest",
			src: `[axes]
b = ["x", "y"]
a = [1, 2]
` + launch,
			want: []string{"x.a1", "x.a2", "y.a1", "y.a2"},
		},
		{
			name: "single-value axes stay out of ids",
			src: `[axes]
a = ["x", "y"]
tp = 8
` + launch,
			want: []string{"x", "y"},
		},
		{
			name: "zip pairs values by position",
			src: `zip = [["model", "tp"]]
[axes]
model = ["small", "big"]
nccl_algo = ["ring", "ll"]
tp = [1, 8]
` + launch,
			want: []string{"small.ring.tp1", "small.ll.tp1", "big.ring.tp8", "big.ll.tp8"},
		},
		{
			name: "exclude matches partially",
			src: `[axes]
a = ["x", "y"]
b = ["p", "q"]
c = ["1", "2"]
[[exclude]]
a = "x"
b = "p"
` + launch,
			want: []string{"x.q.1", "x.q.2", "y.p.1", "y.p.2", "y.q.1", "y.q.2"},
		},
		{
			name: "exclude with a list means any of",
			src: `[axes]
a = ["x", "y", "z"]
b = ["p", "q"]
[[exclude]]
a = ["x", "z"]
b = "q"
` + launch,
			want: []string{"x.p", "y.p", "y.q", "z.p"},
		},
		{
			name: "patches = [] matches the empty set only",
			src: `[axes]
patches = [[], ["sm120-fusion"], ["a", "b"]]
nccl = ["default", "fewchan"]
[presets.nccl.default]
[presets.nccl.fewchan]
NCCL_MAX_NCHANNELS = "2"
[[exclude]]
patches = []
nccl = "fewchan"
` + launch,
			want: []string{"unpatched.default", "sm120-fusion.default", "sm120-fusion.fewchan", "a-b.default", "a-b.fewchan"},
		},
		{
			name: "patch sets match as sets, a list of lists is any of",
			src: `[axes]
patches = [[], ["a", "b"], ["c"]]
[[exclude]]
patches = [["b", "a"], ["c"]]
` + launch,
			want: []string{"unpatched"},
		},
		{
			name: "include naming every axis adds a cell at the end",
			src: `[axes]
a = ["x", "y"]
b = [1, 2]
[[exclude]]
a = "y"
[[include]]
a = "z"
b = 2
` + launch,
			want: []string{"x.b1", "x.b2", "z.b2"},
		},
		{
			name: "include may re-add an excluded cell",
			src: `[axes]
a = ["x", "y"]
b = [1, 2]
[[exclude]]
a = "y"
[[include]]
a = "y"
b = 1
` + launch,
			want: []string{"x.b1", "x.b2", "y.b1"},
		},
		{
			name: "slug collisions get a hash suffix, others do not",
			src: `[axes]
a = ["x y", "x-y", "z"]
` + launch,
			want: []string{"x-y-", "x-y-", "z"},
		},
		{
			name: "booleans and floats",
			src: `[axes]
fusion = [true, false]
mem = [0.55, 0.88]
` + launch,
			want: []string{"fusion-on.mem0.55", "fusion-on.mem0.88", "fusion-off.mem0.55", "fusion-off.mem0.88"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ids(expand(t, tt.src, ExpandOptions{NoDefaultRules: true}))
			if len(got) != len(tt.want) {
				t.Fatalf("ids = %q, want %q", got, tt.want)
			}
			for i := range got {
				w := tt.want[i]
				if strings.HasSuffix(w, "-") { // hash suffix expected
					if !strings.HasPrefix(got[i], w) || len(got[i]) != len(w)+6 {
						t.Errorf("id %d = %q, want %q + 6 hex", i, got[i], w)
					}
					continue
				}
				if got[i] != w {
					t.Errorf("id %d = %q, want %q (all: %q)", i, got[i], w, got)
				}
			}
		})
	}
}

func TestIncludeExtends(t *testing.T) {
	src := `[axes]
patches = [[], ["sm120-fusion"]]
nccl = ["default", "fewchan"]
[presets.nccl.default]
[presets.nccl.fewchan]
NCCL_MAX_NCHANNELS = "2"
"--mem-fraction-static" = 0.5
[[include]]
patches = ["sm120-fusion"]
args = ["--enable-flashinfer-allreduce-fusion"]
env = { FLASHINFER_CUDA_ARCH_LIST = "12.0f" }
[[include]]
nccl = "fewchan"
args = ["--mem-fraction-static", "0.5"]
` + launch
	x := expand(t, src, ExpandOptions{NoDefaultRules: true})
	if x.Steps.Added != 0 || x.Steps.Extended != 3 || len(x.Cells) != 4 {
		t.Fatalf("steps = %+v", x.Steps)
	}
	c := x.Cell("sm120-fusion.fewchan")
	if c == nil {
		t.Fatalf("no cell sm120-fusion.fewchan in %q", ids(x))
	}
	wantArgs := []string{"--mem-fraction-static", "0.5", "--enable-flashinfer-allreduce-fusion"}
	if !reflect.DeepEqual(c.Args, wantArgs) {
		t.Errorf("args = %q, want %q (same flag and value is not repeated)", c.Args, wantArgs)
	}
	if c.Env["FLASHINFER_CUDA_ARCH_LIST"] != "12.0f" || c.Env["NCCL_MAX_NCHANNELS"] != "2" {
		t.Errorf("env = %v", c.Env)
	}
	if !reflect.DeepEqual(c.Command, []string{"serve", "--port", "30000", "--mem-fraction-static", "0.5", "--enable-flashinfer-allreduce-fusion"}) {
		t.Errorf("command = %q", c.Command)
	}
	if len(c.Extended) != 2 {
		t.Errorf("extended = %q", c.Extended)
	}
	if u := x.Cell("unpatched.default"); len(u.Args) != 0 || len(u.Extended) != 0 {
		t.Errorf("unpatched.default was extended: %+v", u)
	}
}

func TestExpandErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"include conflicting env", `[axes]
nccl = ["fewchan"]
[presets.nccl.fewchan]
NCCL_ALGO = "Ring"
[[include]]
nccl = "fewchan"
env = { NCCL_ALGO = "Tree" }
` + launch, "m.toml:5: include sets NCCL_ALGO=Tree but cell nccl=fewchan already has NCCL_ALGO=Ring"},
		{"include conflicting flag", `[axes]
a = ["x"]
[[include]]
a = "x"
args = ["--port", "1"]
` + launch, "m.toml:3: include sets --port 1 but cell a=x already has --port 30000"},
		{"include conflicting with launch.env", `[axes]
a = ["x", "y"]
[[include]]
a = "x"
env = { HOME = "/" }
[launch]
command = ["serve"]
env = { HOME = "/root" }
`, "m.toml:3: include sets HOME, which launch.env already sets"},
		{"partial include matching nothing", `[axes]
a = ["x", "y"]
b = ["p"]
[[exclude]]
a = "x"
[[include]]
a = "x"
args = ["--v"]
` + launch, "m.toml:6: include names only some axes and matches no cell"},
		{"cap", `max_cells = 3
[axes]
a = [1, 2]
b = [1, 2]
` + launch, "more than 3 cells after exclude"},
		{"a file asking for millions of cells", `max_cells = 1000000
[axes]
a = [1, 2]
` + launch, "m.toml:1: max_cells 1000000: a matrix file may ask for at most 65536 cells; pass --max-cells 1000000 to expand more"},
		{"include beyond the cap", `max_cells = 2
[axes]
a = [1, 2]
[[include]]
a = 3
` + launch, "m.toml:4: include adds a cell beyond max_cells 2"},
		{"duplicate explicit ids", `[axes]
a = ["x", "y"]
[[include]]
a = "x"
id = "y"
args = ["--v"]
` + launch, `m.toml:3: duplicate cell id "y"`},
		{"baseline matching nothing", `[axes]
a = ["x", "y"]
[launch]
command = ["serve"]
baseline = { a = "z" }
`, "m.toml:5: launch.baseline matches no cell"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse("m.toml", []byte(tt.src))
			if err == nil {
				_, err = m.Expand(ExpandOptions{NoDefaultRules: true})
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestMaxCellsOption(t *testing.T) {
	src := `[axes]
a = [1, 2, 3]
` + launch
	m := mustParse(t, src)
	if _, err := m.Expand(ExpandOptions{MaxCells: 2, NoDefaultRules: true}); err == nil {
		t.Fatal("3 cells passed --max-cells 2")
	}
	x, err := m.Expand(ExpandOptions{MaxCells: 3, NoDefaultRules: true})
	if err != nil || len(x.Cells) != 3 || x.MaxCells != 3 {
		t.Fatalf("x = %v, err = %v", x, err)
	}
}

func TestShard(t *testing.T) {
	src := `[axes]
a = [1, 2, 3, 4, 5, 6, 7]
` + launch
	m := mustParse(t, src)
	var all []string
	for i := 1; i <= 3; i++ {
		x, err := m.Expand(ExpandOptions{Shard: Shard{Index: i, Count: 3}, NoDefaultRules: true})
		if err != nil {
			t.Fatal(err)
		}
		if x.Total != 7 || len(x.Cells) < 2 || len(x.Cells) > 3 {
			t.Errorf("shard %d: %d of %d cells", i, len(x.Cells), x.Total)
		}
		all = append(all, ids(x)...)
	}
	full := ids(expand(t, src, ExpandOptions{NoDefaultRules: true}))
	if !slices.Equal(all, full) {
		t.Errorf("shards = %q, want %q", all, full)
	}
	for _, bad := range []string{"0/3", "4/3", "1", "a/b", "1/0"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) passed", bad)
		}
	}
}

func TestTemplates(t *testing.T) {
	src := `[axes]
cuda_graph_max_bs = [512, 128]
tp = 8
[launch]
command = ["serve", "--cuda-graph-max-bs", "{{.cuda_graph_max_bs}}", "--log", "{{.id}}.log"]
env = { RUN = "{{.id}}" }
workdir = "/runs/{{.id}}"
health = "http://127.0.0.1:30000/health"
bench = ["bench", "--tp", "{{.tp}}"]
`
	x := expand(t, src, ExpandOptions{NoDefaultRules: true})
	c := x.Cells[1]
	want := []string{"serve", "--cuda-graph-max-bs", "128", "--log", "cuda-graph-max-bs128.log"}
	if !reflect.DeepEqual(c.Command, want) {
		t.Errorf("command = %q, want %q", c.Command, want)
	}
	if c.Env["RUN"] != c.ID || c.Workdir != "/runs/"+c.ID || c.Bench[2] != "8" || c.TP != 8 {
		t.Errorf("cell = %+v", c)
	}
}

func TestTPFromCommand(t *testing.T) {
	x := expand(t, `[axes]
a = ["x"]
[launch]
command = ["serve", "--tp-size=4"]
`, ExpandOptions{NoDefaultRules: true})
	if x.Cells[0].TP != 4 {
		t.Errorf("tp = %d", x.Cells[0].TP)
	}
}

func TestRules(t *testing.T) {
	base := `[axes]
patches = [[], ["sm120-fusion"]]
nccl = ["ring", "tree"]
sm = ["9.0", "12.0"]
[presets.nccl.ring]
NCCL_ALGO = "Ring"
[presets.nccl.tree]
NCCL_ALGO = "Tree"
`
	probe := &ProbeFacts{SMs: []string{"12.0"}, Verdicts: map[string]map[string]string{
		"trtllm_comm": {"9": "supported", "10": "supported", "12": "unsupported-gate"}}}
	tests := []struct {
		name    string
		launch  string
		probe   *ProbeFacts
		pruned  map[string]string // id -> rule
		flagged map[string]string // id -> require-flag rule
	}{
		{
			name:   "tree with cuda graphs is pruned",
			launch: `command = ["serve", "--disable-custom-all-reduce"]`,
			pruned: map[string]string{
				"unpatched.tree.sm90": "nccl-tree-cuda-graphs", "unpatched.tree.sm120": "nccl-tree-cuda-graphs",
				"sm120-fusion.tree.sm90": "nccl-tree-cuda-graphs", "sm120-fusion.tree.sm120": "nccl-tree-cuda-graphs",
			},
		},
		{
			name:   "tree without cuda graphs is kept",
			launch: `command = ["serve", "--disable-cuda-graph", "--disable-custom-all-reduce"]`,
			pruned: map[string]string{},
		},
		{
			name:   "the flashinfer gate needs probe facts",
			launch: `command = ["serve", "--disable-cuda-graph", "--disable-custom-all-reduce"]`,
			probe:  probe,
			pruned: map[string]string{
				"sm120-fusion.ring.sm120": "sm120-fusion-flashinfer-gate", "sm120-fusion.tree.sm120": "sm120-fusion-flashinfer-gate",
			},
		},
		{
			name:   "custom all-reduce on SM120 gets the flag",
			launch: `command = ["serve", "--disable-cuda-graph"]`,
			pruned: map[string]string{},
			flagged: map[string]string{
				"unpatched.ring.sm120": "custom-all-reduce-sm120", "unpatched.tree.sm120": "custom-all-reduce-sm120",
				"sm120-fusion.ring.sm120": "custom-all-reduce-sm120", "sm120-fusion.tree.sm120": "custom-all-reduce-sm120",
			},
		},
		{
			name:   "mnnvl fusion backend on SM12x is pruned",
			launch: `command = ["serve", "--disable-cuda-graph", "--disable-custom-all-reduce", "--flashinfer-allreduce-fusion-backend", "mnnvl"]`,
			pruned: map[string]string{
				"unpatched.ring.sm120": "fusion-mnnvl-sm12x", "unpatched.tree.sm120": "fusion-mnnvl-sm12x",
				"sm120-fusion.ring.sm120": "fusion-mnnvl-sm12x", "sm120-fusion.tree.sm120": "fusion-mnnvl-sm12x",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := expand(t, base+"[launch]\n"+tt.launch+"\n", ExpandOptions{Probe: tt.probe})
			if len(x.Cells) != 8 {
				t.Fatalf("%d cells; pruned cells must stay listed", len(x.Cells))
			}
			for _, c := range x.Cells {
				want := tt.pruned[c.ID]
				got := ""
				if c.Pruned != nil {
					got = c.Pruned.Rule
					if c.Pruned.Reason == "" || c.Pruned.Source == "" || !strings.Contains(c.Pruned.Where, "default.toml:") {
						t.Errorf("%s: decision lacks reason, source or place: %+v", c.ID, c.Pruned)
					}
				}
				if got != want {
					t.Errorf("%s: pruned by %q, want %q", c.ID, got, want)
				}
				flagged := ""
				for _, d := range c.Warnings {
					if d.Action == "require-flag" {
						flagged = d.Rule
						if !slices.Contains(c.Command, d.Flag) || !slices.Contains(c.Args, d.Flag) {
							t.Errorf("%s: flag %s not added: %q", c.ID, d.Flag, c.Command)
						}
					}
				}
				if flagged != tt.flagged[c.ID] {
					t.Errorf("%s: require-flag by %q, want %q", c.ID, flagged, tt.flagged[c.ID])
				}
			}
			if x.Steps.Pruned != len(tt.pruned) || x.Steps.Runnable != 8-len(tt.pruned) {
				t.Errorf("steps = %+v", x.Steps)
			}
			hasNote := slices.ContainsFunc(x.Notes, func(s string) bool { return strings.Contains(s, "--probe-file") })
			if hasNote != (tt.probe == nil) {
				t.Errorf("notes = %q", x.Notes)
			}
		})
	}
}

func TestProbeMajorsWithoutArchAxis(t *testing.T) {
	src := `[axes]
patches = [[], ["sm120-fusion"]]
[launch]
command = ["serve", "--disable-custom-all-reduce"]
`
	pf := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(pf, []byte(`{"host":{"gpus":[{"index":0,"name":"RTX PRO 6000","sm":"12.0"}]},"packages":{},
	 "verdicts":{"trtllm_comm":{"9":{"verdict":"supported","reasons":[]},"12":{"verdict":"unsupported-header","reasons":["x"]}}},"findings":[]}`), 0o644)
	probe, err := ReadProbeFacts(pf)
	if err != nil {
		t.Fatal(err)
	}
	x := expand(t, src, ExpandOptions{Probe: probe})
	if c := x.Cell("sm120-fusion"); c.Pruned == nil || c.Pruned.Rule != "sm120-fusion-flashinfer-gate" {
		t.Errorf("sm120-fusion = %+v", c)
	}
	if c := x.Cell("unpatched"); c.Pruned != nil {
		t.Errorf("unpatched pruned: %+v", c.Pruned)
	}
}

func TestUserRules(t *testing.T) {
	dir := t.TempDir()
	rules := `version = 1
[[rule]]
name = "no-big-bs"
action = "warn"
reason = "big"
source = "https://example.com/why"
[rule.when]
axis = { bs = [512] }
env = { NCCL_ALGO = "" }
`
	if err := os.WriteFile(filepath.Join(dir, "r.toml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `rules = ["r.toml"]
[axes]
bs = [512, 128]
` + launch
	mf := filepath.Join(dir, "m.toml")
	if err := os.WriteFile(mf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(mf)
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Expand(ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w := x.Cells[0].Warnings; len(w) != 1 || w[0].Rule != "no-big-bs" || w[0].Where != filepath.Join(dir, "r.toml")+":2" {
		t.Errorf("warnings = %+v", w)
	}
	if len(x.Cells[1].Warnings) != 0 {
		t.Errorf("bs128 warned: %+v", x.Cells[1].Warnings)
	}
	// The same file again through --rules defines the rule twice.
	if _, err := m.Expand(ExpandOptions{RuleFiles: []string{filepath.Join(dir, "r.toml")}}); err == nil || !strings.Contains(err.Error(), "already defined") {
		t.Errorf("err = %v", err)
	}
}

func TestDefaultRulesParse(t *testing.T) {
	m := mustParse(t, "[axes]\na = 1\n"+launch)
	rules, err := DefaultRules(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) < 5 {
		t.Errorf("%d built-in rules", len(rules))
	}
}

// TestDeterminism expands the same matrix many times and with its sections
// and keys shuffled (axis order kept): ids, order and content agree.
func TestDeterminism(t *testing.T) {
	sections := []string{
		"name = \"d\"\nmax_cells = 100",
		"[axes]\npatches = [[], [\"sm120-fusion\"], [\"a\", \"b\"]]\nnccl = [\"default\", \"fewchan\"]\nbs = [512, 128, 64]\nsm = \"12.0\"",
		"[presets.nccl.default]\nNCCL_MIN_NCHANNELS = \"16\"\nNCCL_BUFFSIZE = \"16777216\"\n\"--mem-fraction-static\" = 0.55",
		"[presets.nccl.fewchan]\nNCCL_MIN_NCHANNELS = \"1\"\nNCCL_PROTO = \"LL\"\nNCCL_BUFFSIZE = \"131072\"\n\"--mem-fraction-static\" = 0.5",
		"[[exclude]]\nbs = 64\nnccl = \"default\"",
		"[[include]]\npatches = [\"sm120-fusion\"]\nargs = [\"--enable-flashinfer-allreduce-fusion\"]",
		"[id_prefix]\nbs = \"cgbs\"",
		"[launch]\ncommand = [\"serve\", \"--cuda-graph-max-bs\", \"{{.bs}}\"]\nenv = { A = \"1\", B = \"{{.nccl}}\" }\nhealth = \"http://x/health\"",
	}
	render := func(x *Expansion) string {
		var b strings.Builder
		for _, c := range x.Cells {
			b.WriteString(c.ID + " " + strings.Join(c.Command, " ") + " " + describe(c))
			for _, k := range sortedKeys(c.Env) {
				b.WriteString(" " + k + "=" + c.Env[k])
			}
			for _, d := range c.Warnings {
				b.WriteString(" w:" + d.Rule)
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	want := render(expand(t, strings.Join(sections, "\n"), ExpandOptions{}))
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 30; i++ {
		s := slices.Clone(sections)
		rng.Shuffle(len(s), func(a, b int) { s[a], s[b] = s[b], s[a] })
		for j, sec := range s {
			// Shuffle the keys inside sections other than [axes].
			lines := strings.Split(sec, "\n")
			if strings.HasPrefix(lines[0], "[") && lines[0] != "[axes]" {
				body := lines[1:]
				rng.Shuffle(len(body), func(a, b int) { body[a], body[b] = body[b], body[a] })
			}
			s[j] = strings.Join(lines, "\n")
		}
		// Top-level keys must come before any table.
		slices.SortStableFunc(s, func(a, b string) int {
			ta, tb := strings.HasPrefix(a, "["), strings.HasPrefix(b, "[")
			switch {
			case ta == tb:
				return 0
			case !ta:
				return -1
			}
			return 1
		})
		got := render(expand(t, strings.Join(s, "\n"), ExpandOptions{}))
		if got != want {
			t.Fatalf("shuffled input %d expanded differently:\n%s\nwant:\n%s\ninput:\n%s", i, got, want, strings.Join(s, "\n"))
		}
	}
}

func TestIncludeNamingAnExistingCell(t *testing.T) {
	x := expand(t, `[axes]
a = ["x", "y"]
b = [1, 2]
[[include]]
a = "x"
b = 1
[[include]]
a = "y"
b = 2
id = "the-y"
`+launch, ExpandOptions{NoDefaultRules: true})
	if x.Steps.Added != 0 || x.Steps.Extended != 0 || len(x.Cells) != 4 {
		t.Errorf("steps = %+v", x.Steps)
	}
	if x.Cells[3].ID != "the-y" {
		t.Errorf("ids = %q", ids(x))
	}
	if len(x.Notes) != 1 || !strings.Contains(x.Notes[0], "m.toml:4: include names a cell that exists and adds nothing") {
		t.Errorf("notes = %q", x.Notes)
	}
}

// TestProbeFromAnotherHost: a report taken on an H200 host (verdicts for
// major 9 only) still judges SM120 cells from its flashinfer analysis.
func TestProbeFromAnotherHost(t *testing.T) {
	r := &probe.Report{
		Host: &probe.Host{GPUs: []probe.GPU{{Index: 0, Name: "NVIDIA H200", SM: "9.0"}}},
		FlashInfer: &probe.FlashInfer{Root: "/site/flashinfer", Layout: "wheel", Modules: map[string]*probe.Module{
			"trtllm_comm": {SMMajors: []int{9, 10}, Source: "flashinfer/jit/comm.py:41", Gate: "supported_major_versions"},
		}},
		Verdicts: map[string]map[string]*probe.Verdict{"trtllm_comm": {"9": {Verdict: probe.Supported}}},
	}
	src := `[axes]
patches = [[], ["sm120-fusion"]]
sm = ["9.0", "12.0"]
[launch]
command = ["serve", "--disable-custom-all-reduce"]
`
	x := expand(t, src, ExpandOptions{Probe: FactsFromReport(r)})
	for _, c := range x.Cells {
		want := c.ID == "sm120-fusion.sm120"
		if got := c.Pruned != nil && c.Pruned.Rule == "sm120-fusion-flashinfer-gate"; got != want {
			t.Errorf("%s: pruned = %v, want %v", c.ID, c.Pruned, want)
		}
	}
}

// A probe report that cannot judge a rule's module (flashinfer absent, or
// not read: verdict unknown) keeps the cell, and the expansion says the
// rule could not be judged instead of staying silent.
func TestRuleOnUnknownVerdictIsNoted(t *testing.T) {
	src := `[axes]
patches = [["sm120-fusion"]]
sm = "12.0"
[launch]
command = ["serve", "--disable-custom-all-reduce"]
`
	x := expand(t, src, ExpandOptions{Probe: &ProbeFacts{SMs: []string{"12.0"}, Verdicts: map[string]map[string]string{}}})
	if x.Cells[0].Pruned != nil {
		t.Fatalf("pruned on an unknown verdict: %+v", x.Cells[0].Pruned)
	}
	want := "rule sm120-fusion-flashinfer-gate (builtin:matrix/rules/default.toml:16) could not be judged on 1 cell(s), first " +
		x.Cells[0].ID + ": the probe report says unknown for trtllm_comm on SM 12"
	if !slices.Contains(x.Notes, want) {
		t.Errorf("notes %q\nwant %q", x.Notes, want)
	}
	// A report that judges it leaves no such note.
	x = expand(t, src, ExpandOptions{Probe: &ProbeFacts{SMs: []string{"12.0"}, Verdicts: map[string]map[string]string{"trtllm_comm": {"12": "supported"}}}})
	for _, n := range x.Notes {
		if strings.Contains(n, "could not be judged") {
			t.Errorf("note on a judged rule: %q", n)
		}
	}
}

// TestExpandCancel checks that a long expansion stops when its context is
// done (Ctrl-C, SIGTERM): millions of combinations, all excluded.
func TestExpandCancel(t *testing.T) {
	var b strings.Builder
	b.WriteString("name = \"big\"\n[axes]\n")
	for _, a := range []string{"a", "b", "c", "d"} {
		b.WriteString(a + " = [")
		for i := range 60 {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Itoa(i))
		}
		b.WriteString("]\n")
	}
	b.WriteString("[[exclude]]\na = [0]\n[launch]\ncommand = [\"x\"]\n")
	m, err := Parse("big.toml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Expand(ExpandOptions{Context: ctx, NoDefaultRules: true, MaxCells: 1 << 30}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled expansion: %v", err)
	}
}

// The rules from the field read NVLink, P2P and the NCCL version from the
// probe report, the TP size and environment from the cell.
func TestFieldRules(t *testing.T) {
	yes := true
	facts := func(nvlink bool, nccl string) *ProbeFacts {
		return &ProbeFacts{SMs: []string{"12.0", "12.0"}, Verdicts: map[string]map[string]string{}, NVLink: &nvlink, P2P: &yes, Versions: map[string]string{"nccl": nccl}}
	}
	src := `[axes]
sm = "12.0"
[launch]
command = ["serve", "--tp", "2"]
`
	pruned := func(x *Expansion) string {
		if p := x.Cells[0].Pruned; p != nil {
			return p.Rule
		}
		return ""
	}
	if got := pruned(expand(t, src, ExpandOptions{Probe: facts(false, "2.26.2")})); got != "nccl-2.26-large-allreduce-sm12x" {
		t.Errorf("NCCL 2.26.2 without NVLink: pruned by %q", got)
	}
	for _, f := range []*ProbeFacts{facts(false, "2.31.2"), facts(true, "2.26.2")} {
		if got := pruned(expand(t, src, ExpandOptions{Probe: f})); got != "" {
			t.Errorf("nvlink %v nccl %s: pruned by %q", *f.NVLink, f.Versions["nccl"], got)
		}
	}
	// TP 1 is no all-reduce at all.
	if got := pruned(expand(t, strings.Replace(src, `"2"`, `"1"`, 1), ExpandOptions{Probe: facts(false, "2.26.2")})); got != "" {
		t.Errorf("TP 1: pruned by %q", got)
	}
	// Without a version in the report the rule says it could not judge.
	f := facts(false, "")
	x := expand(t, src, ExpandOptions{Probe: f})
	if pruned(x) != "" || !slices.ContainsFunc(x.Notes, func(n string) bool {
		return strings.Contains(n, "nccl-2.26-large-allreduce-sm12x") && strings.Contains(n, "nccl version")
	}) {
		t.Errorf("no NCCL version: pruned %q, notes %q", pruned(x), x.Notes)
	}

	empty := `[axes]
sm = "9.0"
[launch]
command = ["serve", "--tp", "2"]
env = { NCCL_GRAPH_FILE = "", PYTORCH_CUDA_ALLOC_CONF = "expandable_segments:True" }
`
	x = expand(t, empty, ExpandOptions{})
	if pruned(x) != "nccl-graph-file-empty" {
		t.Errorf("empty NCCL_GRAPH_FILE: pruned by %q", pruned(x))
	}
	x = expand(t, strings.Replace(empty, `NCCL_GRAPH_FILE = "", `, "", 1), ExpandOptions{})
	if w := x.Cells[0].Warnings; len(w) != 1 || w[0].Rule != "custom-all-reduce-expandable-segments" {
		t.Errorf("expandable segments: warnings %+v", w)
	}
}

// [requires.PATCH] keeps a patch to the TP sizes and topology it wins on.
func TestMatrixRequires(t *testing.T) {
	src := `[axes]
patches = [[], ["sm120-fusion"]]
tp = [2, 4]
[launch]
command = ["serve", "--tp", "{{.tp}}", "--disable-custom-all-reduce"]
[requires.sm120-fusion]
tp = [2]
nvlink = false
`
	x := expand(t, src, ExpandOptions{})
	var got []string
	for _, c := range x.Cells {
		s := c.ID
		if c.Pruned != nil {
			s += ":" + c.Pruned.Rule
		}
		got = append(got, s)
	}
	want := "unpatched.tp2 unpatched.tp4 sm120-fusion.tp2 sm120-fusion.tp4:requires-sm120-fusion-tp"
	if strings.Join(got, " ") != want {
		t.Errorf("got %q, want %q", strings.Join(got, " "), want)
	}
	linked := true
	x = expand(t, src, ExpandOptions{Probe: &ProbeFacts{Verdicts: map[string]map[string]string{}, NVLink: &linked}})
	if p := x.Cells[2].Pruned; p == nil || p.Rule != "requires-sm120-fusion-nvlink" || !strings.Contains(p.Where, ":6") {
		t.Errorf("with NVLink: %+v", p)
	}
	if _, err := Parse("m.toml", []byte(strings.Replace(src, "tp = [2]", "tp = [0]", 1))); err == nil || !strings.Contains(err.Error(), "m.toml:7: requires.sm120-fusion.tp: 0 is not a tensor-parallel size") {
		t.Errorf("bad tp: %v", err)
	}
}

// The user's own --max-cells goes past MaxFileCells; the file's max_cells
// is then not consulted.
func TestMaxCellsFromTheUser(t *testing.T) {
	m, err := Parse("m.toml", []byte("max_cells = 1000000\n[axes]\na = [1, 2]\n[launch]\ncommand = [\"serve\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Expand(ExpandOptions{NoDefaultRules: true, MaxCells: 100000})
	if err != nil {
		t.Fatal(err)
	}
	if x.MaxCells != 100000 || len(x.Cells) != 2 {
		t.Fatalf("max_cells %d, %d cells", x.MaxCells, len(x.Cells))
	}
}

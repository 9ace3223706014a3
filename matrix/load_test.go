package matrix

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"toml syntax", "[axes]\na = [1,\n", "m.toml:2:"},
		{"unknown top-level key", "[axes]\na = 1\n" + launch + "verison = 2\n", `m.toml:6: unknown key "launch.verison"`},
		{"unknown key in base", "[base]\nimage = \"x\"\nimgae = \"y\"\n[axes]\na = 1\n" + launch, `m.toml:3: unknown key "base.imgae"`},
		{"no axes", launch, "no [axes]"},
		{"empty axis", "[axes]\na = [1]\nb = []\n" + launch, "m.toml:3: axes.b is empty"},
		{"duplicate value", "[axes]\na = [1, 1]\n" + launch, `m.toml:2: axes.a: value "1" appears twice`},
		{"table value", "[axes]\na = [{x = 1}]\n" + launch, "m.toml:2: axes.a: values are strings, numbers or booleans, got a table"},
		{"bad patch set", "[axes]\npatches = [[1]]\n" + launch, "m.toml:2: axes.patches: a patch set is a list of patch names"},
		{"axis named id", "[axes]\nid = [1]\n" + launch, `m.toml:2: axes: name "id"`},
		{"unknown axis in exclude", "[axes]\na = [1, 2]\n\n[[exclude]]\na = 1\nb = 2\n" + launch, `m.toml:6: exclude[0]: unknown axis "b" (axes: a)`},
		{"unknown axis in include", "[axes]\na = [1, 2]\n[[include]]\nc = 1\n" + launch, `m.toml:4: include[0]: unknown axis "c"`},
		{"include with a list", "[axes]\na = [1, 2]\n[[include]]\na = [1, 2]\n" + launch, "m.toml:4: include[0].a: values are strings, numbers or booleans, got a list"},
		{"unknown preset", "[axes]\nnccl = [\"default\", \"fewer\"]\n[presets.nccl.default]\nNCCL_ALGO = \"Ring\"\n" + launch, `m.toml:2: axes.nccl: unknown preset "fewer" (presets: default)`},
		{"unknown preset in exclude", "[axes]\nnccl = [\"default\"]\n[presets.nccl.default]\n[[exclude]]\nnccl = \"x\"\n" + launch, `m.toml:5: exclude[0].nccl: unknown preset "x"`},
		{"presets for no axis", "[axes]\na = 1\n[presets.nccl.default]\nNCCL_ALGO = \"Ring\"\n" + launch, `m.toml:3: presets.nccl: no axis "nccl"`},
		{"bad preset key", "[axes]\nn = [\"d\"]\n[presets.n.d]\nnccl_algo = \"Ring\"\n" + launch, `m.toml:4: presets.n.d: key "nccl_algo" is neither`},
		{"preset flag in command", "[axes]\nn = [\"d\"]\n[presets.n.d]\n\"--port\" = 1\n" + launch, "m.toml:4: presets.n.d sets --port, which launch.command also sets"},
		{"two preset axes, one variable", "[axes]\nn = [\"d\"]\no = [\"e\"]\n[presets.n.d]\nNCCL_ALGO = \"Ring\"\n[presets.o.e]\nNCCL_ALGO = \"Tree\"\n" + launch, "m.toml:7: presets.o.e sets NCCL_ALGO, which presets.n also sets"},
		{"zip unequal lengths", "zip = [[\"a\", \"b\"]]\n[axes]\na = [1, 2]\nb = [1, 2, 3]\n" + launch, "m.toml:1: zip[0]: axes a, b have unequal lengths (a has 2, b has 3)"},
		{"zip unknown axis", "zip = [[\"a\", \"c\"]]\n[axes]\na = [1, 2]\n" + launch, `m.toml:1: zip[0]: unknown axis "c"`},
		{"zip of one", "zip = [[\"a\"]]\n[axes]\na = [1, 2]\n" + launch, "m.toml:1: zip[0]: a zip group names at least two axes"},
		{"zip of the wrong type", "name = \"t\"\nzip = [\"a\"]\n[axes]\na = [1, 2]\n" + launch, `m.toml:2: incompatible types: TOML value has type string; destination has type slice (key "zip")`},
		{"template field naming no axis", "[axes]\nbs = [1]\n[launch]\ncommand = [\"serve\",\n  \"{{.cuda_graph_max_bs}}\"]\n", "m.toml:5: launch.command[1]: template field .cuda_graph_max_bs names no axis (axes: bs)"},
		{"template in bench", "[axes]\nbs = [1]\n[launch]\ncommand = [\"serve\"]\nbench = [\"{{.nope}}\"]\n", "m.toml:5: launch.bench[0]: template field .nope names no axis"},
		{"bad template", "[axes]\nbs = [1]\n[launch]\ncommand = [\"{{.bs\"]\n", "m.toml:4: launch.command[0]: template"},
		{"no command", "[axes]\na = 1\n", "launch.command is missing"},
		{"metric without group", "[axes]\na = 1\n[launch]\ncommand = [\"x\"]\nmetric = 'tok/s: [0-9]+'\n", `m.toml:5: launch metric "metric": the regex needs a group`},
		{"bad timeout", "[axes]\na = 1\n[launch]\ncommand = [\"x\"]\nstartup_timeout = \"soon\"\n", "m.toml:5: launch.startup_timeout:"},
		{"bad arch value", "[axes]\nsm = [\"12.0\", \"blackwell\"]\n" + launch, `m.toml:2: axes.sm (the GPU architecture axis): "blackwell" is not a GPU compute capability`},
		{"arch_axis unknown", "arch_axis = \"gpu\"\n[axes]\na = 1\n" + launch, `m.toml:1: arch_axis: unknown axis "gpu"`},
		{"id_prefix unknown axis", "[axes]\na = 1\n[id_prefix]\nb = \"x\"\n" + launch, `m.toml:4: id_prefix: unknown axis "b"`},
		{"max_cells zero", "max_cells = 0\n[axes]\na = 1\n" + launch, "m.toml:1: max_cells must be a positive number"},
		{"base both", "[base]\nimage = \"a\"\npython = \"b\"\n[axes]\na = 1\n" + launch, "m.toml:1: base: set image or python, not both"},
		{"empty exclude", "[axes]\na = 1\n[[exclude]]\n" + launch, "m.toml:3: exclude[0]: empty entry matches every cell"},
		{"include that does nothing", "[axes]\na = [1, 2]\nb = [1]\n[[include]]\na = 1\n" + launch, "m.toml:4: include[0]: names only some axes and adds no env or args"},
		{"missing rules file", "rules = [\"nope.toml\"]\n[axes]\na = 1\n" + launch, "m.toml:1: rules[0]: open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("m.toml", []byte(tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is more than one line: %q", err)
			}
		})
	}
}

func TestRulesErrors(t *testing.T) {
	m := mustParse(t, "[axes]\nbs = [1, 2]\n"+launch)
	head := "version = 1\n[[rule]]\nname = \"r\"\naction = \"warn\"\nreason = \"x\"\nsource = \"https://x\"\n"
	tests := []struct {
		name, src, want string
	}{
		{"version", "version = 2\n", "r.toml:1: rules version 2 is not supported"},
		{"no version", head[12:] + "[rule.when]\nflags = [\"--x\"]\n", "r.toml:1: version is missing: a rules file starts with version = 1"},
		{"unknown axis", head + "[rule.when]\naxis = { cgbs = 512 }\n", `r.toml:8: rule "r": when.axis: unknown axis "cgbs" (axes: bs)`},
		{"unknown condition", head + "[rule.when]\nbs = 512\n", `r.toml:8: rule "r": when: unknown condition "bs"`},
		{"no condition", head, `r.toml:2: rule "r": [rule.when] is missing or empty`},
		{"bad action", strings.Replace(head, "warn", "drop", 1) + "[rule.when]\nflags = [\"--x\"]\n", `r.toml:4: rule "r": action "drop"`},
		{"require-flag without flag", strings.Replace(head, "warn", "require-flag", 1) + "[rule.when]\nflags = [\"--x\"]\n", `rule "r": require-flag needs flag`},
		{"no source", strings.Replace(head, "source = \"https://x\"\n", "", 1) + "[rule.when]\nflags = [\"--x\"]\n", `r.toml:2: rule "r": source is missing`},
		{"unknown key", head + "sauce = 1\n[rule.when]\nflags = [\"--x\"]\n", `r.toml:7: unknown key "rule.sauce"`},
		{"bad verdict", head + "[rule.when]\nprobe_verdict = { trtllm_comm = \"broken\" }\n", `r.toml:8: rule "r": when.probe_verdict.trtllm_comm: "broken" is not`},
		{"twice", head + "[rule.when]\nflags = [\"--x\"]\n" + head[12:] + "[rule.when]\nflags = [\"--x\"]\n", `r.toml:9: rule "r" is defined twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRules("r.toml", []byte(tt.src), m)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLoadStoryExample(t *testing.T) {
	m, err := Load(filepath.Join("..", "examples", "story", "matrix.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var axes []string
	for _, a := range m.Axes {
		axes = append(axes, a.Name)
	}
	if got := strings.Join(axes, ","); got != "patches,nccl,cuda_graph_max_bs,tp,model,sm" {
		t.Errorf("axes = %s", got)
	}
	if m.ArchAxis != "sm" || m.Base.Image == "" || m.Launch.StartupTimeout != 30*time.Minute || len(m.Launch.Metrics) != 2 ||
		m.Launch.Metrics[0].Name != "output tok/s" || m.Launch.Metrics[1].Name != "time to first token s" {
		t.Errorf("matrix = %+v", m)
	}
	fc := m.Presets["nccl"]["fewchan"].Env
	want := map[string]string{"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS", "NCCL_MIN_NCHANNELS": "1",
		"NCCL_MAX_NCHANNELS": "2", "NCCL_BUFFSIZE": "131072", "NCCL_NTHREADS": "64"}
	for k, v := range want {
		if fc[k] != v {
			t.Errorf("fewchan %s = %q, want %q", k, fc[k], v)
		}
	}
	x, err := m.Expand(ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(ids(x), " ")
	wantIDs := "unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5 unpatched.default.cgbs128.tp8.moonshotai-kimi-k2.5 unpatched.fewchan.cgbs128.tp8.moonshotai-kimi-k2.5 unpatched.fewchan.cgbs128.tp4.qwen-qwen3-235b-a22b-fp8 unpatched.fewchan.cgbs128.tp2.qwen-qwen3-30b-a3b unpatched.tree.cgbs128.tp8.moonshotai-kimi-k2.5 sm120-fusion.fewchan.cgbs128.tp8.moonshotai-kimi-k2.5 sm120-fusion.fewchan.cgbs128.tp4.qwen-qwen3-235b-a22b-fp8 sm120-fusion.fewchan.cgbs128.tp2.qwen-qwen3-30b-a3b sm120-fusion-sm120-fusion-auto.fewchan.cgbs128.tp8.moonshotai-kimi-k2.5 sm120-fusion-sm120-fusion-auto.fewchan.cgbs128.tp4.qwen-qwen3-235b-a22b-fp8 sm120-fusion-sm120-fusion-auto.fewchan.cgbs128.tp2.qwen-qwen3-30b-a3b"
	if got != wantIDs {
		t.Errorf("ids = %s\nwant  %s", got, wantIDs)
	}
	if x.Baseline != "unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5" {
		t.Errorf("baseline = %q", x.Baseline)
	}
	// The auto-enable stays where it wins: TP 2 only.
	for _, tp := range []string{"tp8.moonshotai-kimi-k2.5", "tp4.qwen-qwen3-235b-a22b-fp8"} {
		if c := x.Cell("sm120-fusion-sm120-fusion-auto.fewchan.cgbs128." + tp); c.Pruned == nil || c.Pruned.Rule != "requires-sm120-fusion-auto-tp" {
			t.Errorf("auto at %s not pruned by its tp requirement: %+v", tp, c.Pruned)
		}
	}
	if c := x.Cell("sm120-fusion-sm120-fusion-auto.fewchan.cgbs128.tp2.qwen-qwen3-30b-a3b"); c.Pruned != nil {
		t.Errorf("auto at TP 2 pruned: %+v", c.Pruned)
	}
	if c := x.Cell("unpatched.tree.cgbs128.tp8.moonshotai-kimi-k2.5"); c.Pruned == nil || c.Pruned.Rule != "nccl-tree-cuda-graphs" {
		t.Errorf("tree cell not pruned: %+v", c.Pruned)
	}
}

func TestCheckPatches(t *testing.T) {
	m := mustParse(t, "[axes]\npatches = [[], [\"known\"],\n  [\"unknown\"]]\n"+launch)
	err := m.CheckPatches(func(name string) error {
		if name != "known" {
			return os.ErrNotExist
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "m.toml:2: axes.patches:") {
		t.Errorf("err = %v", err)
	}
}

func TestParseSM(t *testing.T) {
	for in, want := range map[string][2]int{"12.0": {12, 0}, "12": {12, 0}, "120": {12, 0}, "sm_120a": {12, 0},
		"sm121": {12, 1}, "9.0": {9, 0}, "90": {9, 0}, "10.3": {10, 3}, "sm_100f": {10, 0}} {
		maj, min, err := parseSM(in)
		if err != nil || maj != want[0] || min != want[1] {
			t.Errorf("parseSM(%q) = %d, %d, %v", in, maj, min, err)
		}
	}
	for _, bad := range []string{"", "x", "0", "12.", ".5", "12.10", "99999"} {
		if _, _, err := parseSM(bad); err == nil {
			t.Errorf("parseSM(%q) passed", bad)
		}
	}
}

func TestKeysAreCaseSensitive(t *testing.T) {
	for _, src := range []string{"[AXes]\na = 1\n" + launch, "[axes]\na = 1\n[base]\nImage = \"x\"\n" + launch} {
		if _, err := Parse("m.toml", []byte(src)); err == nil || !strings.Contains(err.Error(), "unknown key") {
			t.Errorf("err = %v for\n%s", err, src)
		}
	}
	_, err := ParseRules("r.toml", []byte("version = 1\n[[rule]]\nNAME = \"x\"\n"), mustParse(t, "[axes]\na = 1\n"+launch))
	if err == nil || !strings.Contains(err.Error(), "r.toml:3: unknown key") {
		t.Errorf("rules: err = %v", err)
	}
}

func TestCheckPatchesInExcludeAndBaseline(t *testing.T) {
	m := mustParse(t, "[axes]\npatches = [[], [\"known\"]]\n[[exclude]]\npatches = [\"knwon\"]\n[launch]\ncommand = [\"x\"]\n")
	err := m.CheckPatches(func(name string) error {
		if name != "known" {
			return os.ErrNotExist
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "m.toml:3: patches:") {
		t.Errorf("err = %v", err)
	}
	if _, err := Parse("m.toml", []byte("project = \"vllm\"\n[axes]\na = 1\n"+launch)); err == nil || !strings.Contains(err.Error(), "m.toml:1: project \"vllm\"") {
		t.Errorf("err = %v", err)
	}
}

func TestBaselineErrors(t *testing.T) {
	_, err := Parse("m.toml", []byte("[axes]\na = [1, 2]\n[launch]\ncommand = [\"x\"]\nbaseline = { b = 1 }\n"))
	if err == nil || !strings.Contains(err.Error(), `m.toml:5: launch.baseline: unknown axis "b"`) {
		t.Errorf("err = %v", err)
	}
	m := mustParse(t, "[axes]\na = [1, 2]\nb = [3, 4]\n[launch]\ncommand = [\"x\"]\nbaseline = { a = 1 }\n")
	if _, err := m.Expand(ExpandOptions{}); err == nil || !strings.Contains(err.Error(), "m.toml:6: launch.baseline matches 2 cells") {
		t.Errorf("err = %v", err)
	}
	m = mustParse(t, "[axes]\na = [1, 2]\n[launch]\ncommand = [\"x\"]\nbaseline = \"a3\"\n")
	if _, err := m.Expand(ExpandOptions{}); err == nil || !strings.Contains(err.Error(), `m.toml:5: launch.baseline: no cell has id "a3"`) {
		t.Errorf("err = %v", err)
	}
}

// TestLoadRelativePython: a relative base.python path is taken from the
// matrix file's directory (as rules files and workdir are), not from the
// current directory; a bare command name is left for PATH.
func TestLoadRelativePython(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "abs", "python3")
	for _, tt := range []struct{ python, want string }{
		{"venv/bin/python3", filepath.Join(dir, "venv", "bin", "python3")},
		{"./venv/bin/python3", filepath.Join(dir, "venv", "bin", "python3")},
		{"../other/python3", filepath.Join(filepath.Dir(dir), "other", "python3")},
		{"python3", "python3"},
		{abs, abs},
	} {
		file := filepath.Join(dir, "m.toml")
		src := "name = \"py\"\nproject = \"sglang\"\n[base]\npython = " + strconv.Quote(tt.python) +
			"\n[axes]\nmode = [\"a\"]\n[launch]\ncommand = [\"python3\", \"bench.py\"]\n"
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if m.Base.Python != tt.want {
			t.Errorf("base.python %q = %q, want %q", tt.python, m.Base.Python, tt.want)
		}
	}
}

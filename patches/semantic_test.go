package patches_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smpatch/smpatch/patches"
)

// Semantic tests: the function a patch changes, run with python3 on our
// synthetic shapes before and after the patch, under stubbed GPUs of SM
// 8.0, 9.0, 10.0, 12.0 and 12.1. On SM12x the patched code must give what
// the patch is for; everywhere else it must give what the unpatched code
// gives. Without python3 the tests say SKIP and why.

// pyStubs stand in for the sglang modules and packages the fixtures
// import; the stubbed GPU is $SMPATCH_SM (major*10+minor, as sglang's
// get_device_sm()).
var pyStubs = map[string]string{
	"sglang/__init__.py":     "",
	"sglang/srt/__init__.py": "",
	"sglang/srt/utils/__init__.py": `import os


def _sm():
    return int(os.environ["SMPATCH_SM"])


def get_device_sm():
    return _sm()


def get_device_name():
    return os.environ.get("SMPATCH_DEVICE", "NVIDIA RTX PRO 6000 Blackwell")


def is_cuda():
    return True


def is_musa():
    return False


def is_hip():
    return False


def is_sm90_supported():
    return _sm() // 10 == 9


def is_sm100_supported():
    return _sm() // 10 == 10


def is_sm120_supported():
    return _sm() // 10 == 12


def is_blackwell_supported():
    return _sm() // 10 in (10, 11, 12)


def is_triton_kernels_available():
    return True


def get_quantization_config(hf_config):
    return (hf_config or {}).get("quant_method")
`,
	"sglang/srt/utils/common.py": "from sglang.srt.utils import *  # noqa: F401,F403\n",
	"sglang/srt/environ.py": `class _Env:
    def __init__(self, value):
        self.value = value

    def get(self):
        return self.value


class _Envs:
    SGLANG_ENABLE_JIT_DEEPGEMM = _Env(True)


envs = _Envs()
`,
	"sglang/srt/runtime_context.py": `from sglang.srt.utils import is_sm90_supported, is_sm100_supported, is_sm120_supported


class _Platform:
    @property
    def is_sm90(self):
        return is_sm90_supported()

    @property
    def is_sm100(self):
        return is_sm100_supported()

    @property
    def is_sm120(self):
        return is_sm120_supported()


def get_platform():
    return _Platform()
`,
	"deep_gemm.py": "",
}

// python3 or a skip that says why.
func python3(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("SKIP: python3 not on PATH: the semantic tests run the patched Python; nothing else is checked here")
	}
	return py
}

// pyTree writes files (repository paths) and the stubs into a fresh
// directory and returns its python/ directory, every package directory
// with an __init__.py.
func pyTree(t *testing.T, files map[string][]byte) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "python")
	put := func(rel string, data []byte) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for rel, data := range pyStubs {
		put(rel, []byte(data))
	}
	for name, data := range files {
		rel, ok := strings.CutPrefix(name, "python/")
		if !ok || rel == "sglang/version.py" {
			continue
		}
		put(rel, data)
		for d := filepath.Dir(filepath.Join(root, filepath.FromSlash(rel))); d != root; d = filepath.Dir(d) {
			init := filepath.Join(d, "__init__.py")
			if _, err := os.Stat(init); os.IsNotExist(err) && filepath.Base(d) != "python" {
				put(strings.TrimPrefix(filepath.ToSlash(init), filepath.ToSlash(root)+"/"), nil)
			}
		}
	}
	return root
}

// pyDriver runs the body of a semantic case once per environment, in one
// interpreter: each run sets the environment, forgets the sglang modules
// (their module-level code reads the stubbed GPU) and executes the body,
// which leaves its answer in `result`.
const pyDriver = `import json, os, sys
body = sys.stdin.read()
out = []
for env in json.loads(sys.argv[1]):
    os.environ.update(env)
    for name in [m for m in sys.modules if m == "deep_gemm" or m.split(".")[0] == "sglang"]:
        del sys.modules[name]
    ns = {}
    exec(compile(body, "<semantic case>", "exec"), ns)
    out.append(ns["result"])
print(json.dumps(out))
`

// runPy runs body in the tree at root once per environment and returns
// each run's result.
func runPy(t *testing.T, py, root, body string, envs []map[string]string) []any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	arg, err := json.Marshal(envs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, py, "-B", "-c", pyDriver, string(arg))
	cmd.Dir = root
	cmd.Env = []string{"PYTHONPATH=" + root, "PATH=" + os.Getenv("PATH")}
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var v []any
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &v); err != nil || len(v) != len(envs) {
		t.Fatalf("python printed %q (%v), want %d results", out, err, len(envs))
	}
	return v
}

var stubbedSMs = []int{80, 90, 100, 120, 121}

// semanticCase is one patch on one shape: body leaves in `result` the
// value the patch is about, under each launch (extra environment) and
// each stubbed SM; want12 says what the patched code must give on SM12x
// under a launch.
type semanticCase struct {
	patch, shape, body string
	launches           []map[string]string
	want12             func(launch map[string]string) any
}

func checkSemantics(t *testing.T, tc semanticCase) {
	t.Helper()
	py := python3(t)
	p := builtinPatch(t, tc.patch)
	files := readShape(t, tc.shape)
	_, tree := checkout(t, files)
	pl := plan(t, p, tree, patches.PlanOptions{Strict: true})
	if pl.Outcome() != patches.OutcomeApplies {
		t.Fatalf("%s on %s: %s (%s)", tc.patch, tc.shape, pl.Outcome(), pl.Reason)
	}
	launches := tc.launches
	if len(launches) == 0 {
		launches = []map[string]string{{}}
	}
	var envs []map[string]string
	for _, l := range launches {
		for _, sm := range stubbedSMs {
			e := map[string]string{"SMPATCH_SM": fmt.Sprint(sm)}
			for k, v := range l {
				e[k] = v
			}
			envs = append(envs, e)
		}
	}
	before := runPy(t, py, pyTree(t, files), tc.body, envs)
	after := runPy(t, py, pyTree(t, overlay(files, pl.Changes())), tc.body, envs)
	for i, e := range envs {
		sm, l := e["SMPATCH_SM"], launches[i/len(stubbedSMs)]
		a, b := fmt.Sprint(after[i]), fmt.Sprint(before[i])
		switch {
		case strings.HasPrefix(sm, "12") && a != fmt.Sprint(tc.want12(l)):
			t.Errorf("%s on %s %v: SM %s: patched gives %s, want %v (unpatched: %s)", tc.patch, tc.shape, l, sm, a, tc.want12(l), b)
		case !strings.HasPrefix(sm, "12") && a != b:
			t.Errorf("%s on %s %v: SM %s: patched gives %s, unpatched %s: a GPU the patch is not for changed", tc.patch, tc.shape, l, sm, a, b)
		}
	}
}

func always(v any) func(map[string]string) any { return func(map[string]string) any { return v } }

func TestSemanticsDeepGEMM(t *testing.T) {
	const body = "from sglang.srt.layers.deep_gemm_wrapper import configurer as m\nresult = [m.ENABLE_JIT_DEEPGEMM, m._compute_enable_deep_gemm()]\n"
	for _, shape := range []string{"deepgemm-lt90", "deepgemm-musa", "deepgemm-sm120"} {
		checkSemantics(t, semanticCase{patch: "sm12x-deepgemm-off", shape: shape, body: body, want12: always([]any{false, false})})
	}
}

func TestSemanticsGPTOSSMXFP4(t *testing.T) {
	const body = "from sglang.srt.server_args import ServerArgs\na = ServerArgs(hf_config={'quant_method': 'mxfp4'})\na._handle_model_specific_adjustments()\nresult = [a.moe_runner_backend, a.dtype]\n"
	for _, shape := range []string{"gpt-oss-elif", "gpt-oss-if"} {
		checkSemantics(t, semanticCase{patch: "sm12x-gpt-oss-mxfp4", shape: shape, body: body, want12: always([]any{"triton", "bfloat16"})})
	}
}

// sm120-fusion-auto turns the fusion on on SM12x only at TP2 on one node;
// at TP4 and TP8, or on two nodes, SM12x stays opt-in.
func TestSemanticsFusionAutoTP(t *testing.T) {
	serverArgs := "import os\nfrom sglang.srt.server_args import ServerArgs\na = ServerArgs(model_path='m', architecture='DeepseekV3ForCausalLM', tp_size=int(os.environ['TP']), nnodes=int(os.environ['NNODES']))\na._handle_model_specific_adjustments()\nresult = bool(getattr(a, 'enable_flashinfer_allreduce_fusion', None) or getattr(a, 'flashinfer_allreduce_fusion_backend', None))\n"
	overrides := "import os, types\nfrom sglang.srt.arg_groups import overrides as o\ncfg = types.SimpleNamespace(hf_config=types.SimpleNamespace(architectures=['DeepseekV3ForCausalLM']))\nv = types.SimpleNamespace(get_model_config=lambda: cfg, flashinfer_allreduce_fusion_backend=None, tp_size=int(os.environ['TP']), nnodes=int(os.environ['NNODES']), enable_dp_attention=False, moe_a2a_backend='none')\nresult = o._flashinfer_allreduce_fusion_auto_enable(v).get('flashinfer_allreduce_fusion_backend') == 'auto'\n"
	var launches []map[string]string
	for _, l := range [][2]int{{2, 1}, {4, 1}, {8, 1}, {2, 2}} {
		launches = append(launches, map[string]string{"TP": fmt.Sprint(l[0]), "NNODES": fmt.Sprint(l[1])})
	}
	on := func(l map[string]string) any { return l["TP"] == "2" && l["NNODES"] == "1" }
	for _, shape := range []struct{ name, body string }{
		{"c4-s3", serverArgs}, {"c4-s4-resolver", serverArgs}, {"c4-s5", overrides}, {"c5-s5", overrides},
	} {
		checkSemantics(t, semanticCase{patch: auto, shape: shape.name, body: shape.body, launches: launches, want12: on})
	}
}

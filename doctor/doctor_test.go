package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/smpatch/smpatch/probe"
	"github.com/smpatch/smpatch/source"
)

// synthTree writes testdata/trees/NAME.txtar to a directory and opens it
// as a checkout.
func synthTree(t testing.TB, name string) (source.Tree, string) {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join("testdata", "trees", name+".txtar"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range ar.Files {
		p := filepath.Join(dir, f.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := source.OpenCheckout(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tree, dir
}

// writeModel writes a model directory with config.json.
func writeModel(t testing.TB, config string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

const fp8MoE = `{"architectures": ["Qwen3MoeForCausalLM"], "num_attention_heads": 32, "head_dim": 128,
 "moe_intermediate_size": 768, "num_experts": 128,
 "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}`

// pcieHost is a report of n GPUs of SM sm on PCIe, P2P OK, no NVLink, with
// the packages given and a current probe's host facts.
func pcieHost(n int, sm, name string, pkgs map[string]*probe.Package) *probe.Report {
	h := &probe.Host{Driver: "580.65.06", GPUSource: "nvidia-smi",
		CUDAToolkit: &probe.CUDAToolkit{Version: "12.9.1", VersionFrom: "/usr/local/cuda/version.json", Root: "/usr/local/cuda"}}
	for i := range n {
		h.GPUs = append(h.GPUs, probe.GPU{Index: i, Name: name, SM: sm, MemoryMiB: 97887})
	}
	if n > 1 {
		h.P2P, h.NVLink = matrix(n, "OK"), matrix(n, "NS")
	}
	h.PCIe = &probe.PCIe{From: "/sys/bus/pci/devices"}
	h.IOMMU = &probe.IOMMU{Mode: "passthrough", Evidence: []string{"/proc/cmdline: iommu=pt"}}
	h.NvidiaDriver = &probe.NvidiaDriver{Params: map[string]string{"RegistryDwords": `""`}, RegistryDwords: map[string]string{}}
	sp := "/venv/lib/python3.12/site-packages"
	r := &probe.Report{Host: h, Python: &probe.Python{SitePackages: []string{sp}}, Packages: map[string]*probe.Package{}, Unknown: map[string]string{}}
	for k, p := range pkgs {
		if p.Location == "" {
			p.Location = sp
		}
		r.Packages[k] = p
	}
	return r
}

func matrix(n int, v string) [][]string {
	m := make([][]string, n)
	for i := range m {
		m[i] = make([]string, n)
		for j := range m[i] {
			m[i][j] = v
			if i == j {
				m[i][j] = "X"
			}
		}
	}
	return m
}

func run(t *testing.T, in Inputs) *Report {
	t.Helper()
	rules, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	if in.Env == nil {
		in.Env = map[string]string{}
	}
	rep, err := Run(context.Background(), in, rules)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func ids(rep *Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, f.Rule)
	}
	return out
}

func finding(rep *Report, id string) *Finding {
	for i := range rep.Findings {
		if rep.Findings[i].Rule == id {
			return &rep.Findings[i]
		}
	}
	return nil
}

var deepGemmPkgs = map[string]*probe.Package{
	"sgl-deep-gemm": {Version: "0.1.0"}, "sglang-kernel": {Version: "0.4.2.post2"},
	"triton": {Version: "3.5.1"}, "flashinfer-python": {Version: "0.6.11.post1"},
}

// TestRunArgparseShape: on the 0.5.8-0.5.13 shape, SM 12.0 gets DeepGEMM
// (block-FP8 model), the fused all-reduce asked for is skipped, custom
// all-reduce is off at TP 8; a tuned MoE config for another Triton is a
// fallback, not a warning.
func TestRunArgparseShape(t *testing.T) {
	tree, _ := synthTree(t, "argparse")
	model := writeModel(t, fp8MoE)
	rep := run(t, Inputs{Tree: tree, Host: pcieHost(8, "12.0", "NVIDIA RTX PRO 6000 Blackwell Server Edition", deepGemmPkgs), HostFrom: "test",
		Launch: []string{"python3", "-m", "sglang.launch_server", "--model-path", model, "--tp", "8", "--enable-flashinfer-allreduce-fusion"}})
	got := ids(rep)
	for _, want := range []string{"deepgemm-sm120", "fused-allreduce-sglang-gate", "custom-ar-pcie-tp-gt2", "fused-allreduce-tp4", "fused-allreduce-pin"} {
		if !slices.Contains(got, want) {
			t.Errorf("findings %v lack %s", got, want)
		}
	}
	for _, not := range []string{"deepgemm-sm121", "moe-config-missing", "launch-flags"} {
		if slices.Contains(got, not) {
			t.Errorf("findings %v hold %s", got, not)
		}
	}
	if rep.Version != "0.5.12" || rep.Blockers < 2 {
		t.Errorf("version %q, %d blockers", rep.Version, rep.Blockers)
	}
	f := finding(rep, "deepgemm-sm120")
	if f == nil || !slices.ContainsFunc(f.Evidence, func(e string) bool {
		return strings.HasPrefix(e, "python/sglang/srt/layers/deep_gemm_wrapper/configurer.py:3: ")
	}) {
		t.Errorf("deepgemm-sm120 evidence lacks configurer.py:3: %+v", f)
	}
	if f := finding(rep, "fused-allreduce-sglang-gate"); f == nil || f.Remedies[0] != "smpatch apply sm120-fusion: widens the gate (and the resolver and workspace preflight where the tree has them); needs flashinfer >= 0.6.17" {
		t.Errorf("fusion remedy: %+v", f)
	}
	// Switching DeepGEMM off is seen.
	rep = run(t, Inputs{Tree: tree, Host: pcieHost(8, "12.0", "NVIDIA RTX PRO 6000 Blackwell Server Edition", deepGemmPkgs),
		Env:    map[string]string{"SGLANG_ENABLE_JIT_DEEPGEMM": "1"},
		Launch: []string{"SGLANG_ENABLE_JIT_DEEPGEMM=0", "python3", "-m", "sglang.launch_server", "--model-path", model}})
	if slices.Contains(ids(rep), "deepgemm-sm120") {
		t.Errorf("SGLANG_ENABLE_JIT_DEEPGEMM=0 in the launch: %v", ids(rep))
	}
}

// TestRunAnnotatedShape: on the 0.5.14+ shape SM 12.0 is excluded from
// DeepGEMM and 12.1 is not; flags come from the annotations.
func TestRunAnnotatedShape(t *testing.T) {
	tree, _ := synthTree(t, "annotated")
	model := writeModel(t, fp8MoE)
	launch := []string{"sglang", "serve", model, "--tp", "4", "--flashinfer-allreduce-fusion-backend", "auto"}
	rep := run(t, Inputs{Tree: tree, Host: pcieHost(4, "12.0", "NVIDIA RTX PRO 6000 Blackwell Server Edition", deepGemmPkgs), Launch: launch})
	got := ids(rep)
	if slices.Contains(got, "deepgemm-sm120") || !slices.Contains(got, "fused-allreduce-sglang-gate") || !slices.Contains(got, "moe-config-missing") {
		t.Errorf("SM 12.0 findings: %v", got)
	}
	if slices.Contains(got, "fused-allreduce-pin") {
		t.Errorf("the tree pins flashinfer 0.6.17: %v", got)
	}
	f := finding(rep, "moe-config-missing")
	if f == nil || !strings.Contains(f.Happens, "E=128,N=192,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,dtype=fp8_w8a8,block_shape=[128, 128].json") {
		t.Errorf("moe config name: %+v", f)
	}
	rep = run(t, Inputs{Tree: tree, Host: pcieHost(1, "12.1", "NVIDIA GB10", deepGemmPkgs), Launch: launch[:3]})
	if got := ids(rep); !slices.Contains(got, "deepgemm-sm121") {
		t.Errorf("SM 12.1 findings: %v", got)
	}
}

func TestRunLaunchParseProblems(t *testing.T) {
	tree, _ := synthTree(t, "argparse")
	rep := run(t, Inputs{Tree: tree, Host: pcieHost(2, "12.0", "NVIDIA RTX 5090", nil),
		Launch: []string{"python", "-m", "sglang.launch_server", "--model-path", "org/m", "--no-such-flag", "--tp"}})
	var got []string
	for _, f := range rep.Findings {
		if f.Rule == "launch-flags" {
			got = append(got, f.Happens)
		}
	}
	want := []string{
		"error: unrecognized arguments: --no-such-flag (argparse exits with status 2 before the model loads)",
		"error: argument --tensor-parallel-size/--tp-size: expected one argument (argparse exits with status 2 before the model loads)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("launch problems:\n%q\nwant\n%q", got, want)
	}
	if !strings.Contains(rep.Model, "--model-path org/m is not a local directory") {
		t.Errorf("model: %q", rep.Model)
	}
}

// TestRunUnknownIsUnknown: without a host, a model or a launch, rules that
// need them are undecided, each with what was missing.
func TestRunUnknownIsUnknown(t *testing.T) {
	tree, _ := synthTree(t, "argparse")
	rep := run(t, Inputs{Tree: tree, NoHost: "no probe in this test"})
	if len(rep.Findings) != 0 {
		t.Errorf("findings without host, model or launch: %v", ids(rep))
	}
	if len(rep.Undecided) == 0 {
		t.Fatal("nothing undecided")
	}
	for _, u := range rep.Undecided {
		if len(u.Missing) == 0 || !strings.Contains(u.Missing[0], "unknown (") {
			t.Errorf("%s: missing %q", u.Rule, u.Missing)
		}
	}
	if rep.Unknown["gpu"] != "no probe in this test" || !strings.HasPrefix(rep.Unknown["flag"], "no launch given") {
		t.Errorf("unknown: %v", rep.Unknown)
	}
}

func TestRunBadInput(t *testing.T) {
	tree, dir := synthTree(t, "argparse")
	rules, _ := Rules()
	try := func(in Inputs) error {
		_, err := Run(context.Background(), in, rules)
		return err
	}
	var ie *InputError
	for name, cfg := range map[string]string{
		"not JSON":             `{"architectures": [`,
		"an array":             `[1]`,
		"no architectures":     `{"model_type": "x"}`,
		"unknown architecture": `{"architectures": ["NoSuchModelForCausalLM"]}`,
	} {
		err := try(Inputs{Tree: tree, ModelDir: writeModel(t, cfg)})
		if !errors.As(err, &ie) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v", name, err)
		}
	}
	err := try(Inputs{Tree: tree, ModelDir: t.TempDir()})
	if !errors.As(err, &ie) || !strings.HasSuffix(err.Error(), "config.json: no config.json in the model directory") {
		t.Errorf("missing config.json: %v", err)
	}
	// An architecture the tree lacks, but with an auto_map: the
	// Transformers backend takes it.
	if err := try(Inputs{Tree: tree, ModelDir: writeModel(t, `{"architectures": ["MyModel"], "auto_map": {"AutoModel": "m.MyModel"}}`)}); err != nil {
		t.Errorf("auto_map: %v", err)
	}
	var ns *NotSGLangError
	if err := try(Inputs{Tree: tree, Launch: []string{"vllm", "serve", "m"}}); !errors.As(err, &ns) {
		t.Errorf("vllm launch: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "python/sglang/_version.py")); err != nil {
		t.Fatal(err)
	}
	if err := try(Inputs{Tree: tree}); !errors.As(err, &ie) || !strings.Contains(err.Error(), "the sglang version is unknown") {
		t.Errorf("no version: %v", err)
	}
}

func TestParseLaunch(t *testing.T) {
	for _, tc := range []struct {
		argv  []string
		entry string
		args  []string
		env   map[string]string
	}{
		{[]string{"python3", "-m", "sglang.launch_server", "--tp", "2"}, "python3 -m sglang.launch_server", []string{"--tp", "2"}, map[string]string{}},
		{[]string{"env", "NCCL_ALGO=Tree", "A=b=c", "/venv/bin/python3.12", "-u", "-X", "dev", "-m", "sglang.launch_server"}, "python3.12 -m sglang.launch_server", nil, map[string]string{"NCCL_ALGO": "Tree", "A": "b=c"}},
		{[]string{"sglang", "serve", "Qwen/Qwen3-8B", "--model-type", "llm", "--port", "1"}, "sglang serve", []string{"--model-path", "Qwen/Qwen3-8B", "--port", "1"}, map[string]string{}},
		{[]string{"python", "-m", "sglang.cli.main", "serve", "--model-type=llm", "--model", "m"}, "python -m sglang.cli.main serve", []string{"--model", "m"}, map[string]string{}},
	} {
		l, err := ParseLaunch(tc.argv)
		if err != nil {
			t.Errorf("%q: %v", tc.argv, err)
			continue
		}
		if l.Entry != tc.entry || !slices.Equal(l.Args, tc.args) || len(l.Env) != len(tc.env) {
			t.Errorf("%q: entry %q args %q env %v", tc.argv, l.Entry, l.Args, l.Env)
		}
		for k, v := range tc.env {
			if l.Env[k] != v {
				t.Errorf("%q: env %s = %q", tc.argv, k, l.Env[k])
			}
		}
	}
	for _, argv := range [][]string{{}, {"A=1"}, {"vllm", "serve"}, {"python", "-m", "vllm.entrypoints"}, {"python", "server.py"}, {"sglang", "generate"}, {"python", "-m"}} {
		if _, err := ParseLaunch(argv); err == nil {
			t.Errorf("%q: parsed", argv)
		}
	}
}

func TestServerArgsShapes(t *testing.T) {
	for _, shape := range []string{"argparse", "annotated"} {
		tree, _ := synthTree(t, shape)
		data, err := tree.ReadFile(ServerArgsFile)
		if err != nil {
			t.Fatal(err)
		}
		sa, err := ParseServerArgs(data)
		if err != nil {
			t.Fatal(err)
		}
		p := sa.Parse([]string{"--model", "m", "--tp", "8", "--fp8-gemm-backend=deep_gemm", "--disable-cuda-graph", "--cuda-graph-bs", "1", "2", "4", "--kv-cache-dtype", "fp8_e4m3"})
		if len(p.Problems) != 0 {
			t.Errorf("%s: problems %q", shape, p.Problems)
		}
		for dest, want := range map[string][]string{"model_path": {"m"}, "tp_size": {"8"}, "fp8_gemm_runner_backend": {"deep_gemm"}, "disable_cuda_graph": {"True"}, "cuda_graph_bs": {"1", "2", "4"}, "kv_cache_dtype": {"fp8_e4m3"}} {
			if got := p.Given[dest]; !slices.Equal(got, want) {
				t.Errorf("%s: %s = %q, want %q", shape, dest, got, want)
			}
		}
		if f := sa.Fields["tp_size"]; f == nil || !f.Static || !slices.Equal(f.Default.Vals, []string{"1"}) {
			t.Errorf("%s: tp_size field %+v", shape, f)
		}
		if got := sa.missingRequired(sa.Parse(nil)); len(got) != 1 || !strings.Contains(got[0], "--model") {
			t.Errorf("%s: required %q", shape, got)
		}
	}
	tree, _ := synthTree(t, "argparse")
	data, _ := tree.ReadFile(ServerArgsFile)
	sa, _ := ParseServerArgs(data)
	if f := sa.Fields["mem_fraction_static"]; f == nil || !f.Static || f.Default.Vals[0] != "0.88" {
		t.Errorf("a parenthesised default: %+v", f)
	}
	if f := sa.Fields["warmups"]; f == nil || f.Static {
		t.Errorf("a computed default is not static: %+v", f)
	}
	if _, amb := sa.Lookup("--e"); !slices.Equal(amb, []string{"--enable-flashinfer-allreduce-fusion", "--ep", "--ep-size", "--expert-parallel-size"}) {
		t.Errorf("ambiguous prefix: %q", amb)
	}
	tree, _ = synthTree(t, "annotated")
	data, _ = tree.ReadFile(ServerArgsFile)
	sa, _ = ParseServerArgs(data)
	p := sa.Parse([]string{"--model", "m", "--enable-flashinfer-allreduce-fusion", "--disable-radix"})
	if len(p.Problems) != 0 || !slices.Equal(p.Given["enable_flashinfer_allreduce_fusion"], []string{"True"}) || !slices.Equal(p.Given["disable_radix"], []string{"True"}) {
		t.Errorf("deprecated switches: %+v", p)
	}
	if spec, _ := sa.Lookup("--stat-loggers"); spec != nil {
		t.Error("a field without Arg or help got a flag")
	}
}

func TestModelQuantization(t *testing.T) {
	for cfg, want := range map[string]string{
		`{"architectures": ["A"]}`: "none",
		`{"architectures": ["A"], "quantization_config": {"quant_method": "FP8", "weight_block_size": [128, 128]}}`:      "fp8",
		`{"architectures": ["A"], "quantization_config": {"quant_algo": "NVFP4"}}`:                                       "modelopt_fp4",
		`{"architectures": ["A"], "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}}`:             "modelopt_fp8",
		`{"architectures": ["A"], "quantization_config": {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION"}}`: "modelopt_mixed",
		`{"architectures": ["A"], "compression_config": {"format": "x"}}`:                                                "compressed-tensors",
		`{"architectures": ["A"], "text_config": {"quantization_config": {"quant_method": "mxfp4"}}}`:                    "mxfp4",
	} {
		cfgMap, err := ParseConfig([]byte(cfg))
		if err != nil {
			t.Fatal(err)
		}
		f := newFacts()
		(&Model{Config: cfgMap}).addFacts(f, []string{"A"})
		if got := f.first("model.quantization"); got != want {
			t.Errorf("%s: quantization %q, want %q", cfg, got, want)
		}
	}
	dir := writeModel(t, `{"architectures": ["A"], "num_experts": 64, "text_config": {"num_attention_heads": 40}}`)
	if err := os.WriteFile(filepath.Join(dir, "hf_quant_config.json"), []byte(`{"quantization": {"quant_algo": "NVFP4"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := ReadModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := newFacts()
	m.addFacts(f, []string{"A"})
	if f.first("model.quantization") != "modelopt_fp4" || f.first("model.experts") != "64" || f.first("model.num_attention_heads") != "40" {
		t.Errorf("hf_quant_config.json, experts, text_config: %v %v %v", f.known["model.quantization"], f.known["model.experts"], f.known["model.num_attention_heads"])
	}
}

// A config.json that is a named pipe is named once in the one line.
func TestReadModelNamedPipeNamedOnce(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.json")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip(err)
	}
	_, err := ReadModel(dir)
	if err == nil || strings.Count(err.Error(), p) != 1 || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("error %v", err)
	}
}

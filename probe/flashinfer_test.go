package probe

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/rogpeppe/go-internal/txtar"
)

func loadTxtar(t testing.TB, name string) fstest.MapFS {
	t.Helper()
	a, err := txtar.ParseFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{}
	for _, f := range a.Files {
		fsys[f.Name] = &fstest.MapFile{Data: f.Data, Mode: 0o644}
	}
	return fsys
}

func staticOf(t *testing.T, fixture, dir string) *Report {
	t.Helper()
	r, err := Static(context.Background(), loadTxtar(t, fixture), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if r.FlashInfer == nil {
		t.Fatalf("%s: flashinfer not found; unknown: %v", fixture, r.Unknown)
	}
	return r
}

func TestStaticVerdicts(t *testing.T) {
	tests := []struct {
		fixture, dir    string
		version, layout string
		module          string
		majors          []int
		source          string
		verdict         map[int]string
		reason          map[int]string
	}{
		{
			fixture: "wheel-gate-9-10.txtar", dir: "/lib/python3.12/site-packages",
			version: "0.6.16.post4", layout: "wheel", module: "trtllm_comm", majors: []int{9, 10},
			source:  "flashinfer/jit/comm.py:19",
			verdict: map[int]string{9: Supported, 10: Supported, 12: UnsupportedGate, 8: UnsupportedGate},
			reason:  map[int]string{12: `No supported CUDA architectures found for major versions [9, 10]`, 9: "no __CUDA_ARCH__ exclusion for SM 9.x in trtllm_allreduce.cuh, trtllm_allreduce_fusion.cuh"},
		},
		{
			fixture: "wheel-gate-9-10-12.txtar", dir: "lib/python3.12/site-packages",
			version: "0.6.17", layout: "wheel", module: "trtllm_comm", majors: []int{9, 10, 12},
			source:  "flashinfer/jit/comm.py:6",
			verdict: map[int]string{9: Supported, 12: Supported, 11: UnsupportedGate},
			reason:  map[int]string{12: "flashinfer/compilation_context.py:2: SM 12.x needs CUDA >= 12.9"},
		},
		{
			fixture: "checkout-no-gate.txtar", dir: ".",
			version: "0.2.8", layout: "source", module: "trtllm_comm", majors: nil,
			source:  "flashinfer/comm/trtllm_ar.py:15",
			verdict: map[int]string{9: Unknown, 10: Unknown, 12: UnsupportedHeader},
			reason:  map[int]string{12: "include/flashinfer/comm/trtllm_allreduce.cuh:3", 9: "(conditional)"},
		},
		{
			fixture: "wheel-edited-gate.txtar", dir: "site-packages",
			version: "0.6.16.post4", layout: "wheel", module: "trtllm_comm", majors: []int{9, 10, 12},
			source:  "flashinfer/jit/comm.py:3",
			verdict: map[int]string{12: UnsupportedHeader, 9: Supported},
			reason:  map[int]string{12: "1 kernel bodies compiled out for SM 12.x: flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh:2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			r := staticOf(t, tt.fixture, tt.dir)
			fi := r.FlashInfer
			if fi.Version != tt.version || fi.Layout != tt.layout {
				t.Errorf("version %q layout %q, want %q %q", fi.Version, fi.Layout, tt.version, tt.layout)
			}
			m := fi.Modules[tt.module]
			if m == nil {
				t.Fatalf("no module %s in %v", tt.module, keys(fi.Modules))
			}
			if !reflect.DeepEqual(m.SMMajors, tt.majors) || m.Source != tt.source {
				t.Errorf("gate %v at %s, want %v at %s", m.SMMajors, m.Source, tt.majors, tt.source)
			}
			for major, want := range tt.verdict {
				v := ModuleVerdict(fi, tt.module, major)
				if v.Verdict != want {
					t.Errorf("SM %d: %s (%s), want %s", major, v.Verdict, strings.Join(v.Reasons, "; "), want)
				}
				if r.Verdicts[tt.module] != nil {
					if rv := r.Verdicts[tt.module][itoa(major)]; rv != nil && rv.Verdict != v.Verdict {
						t.Errorf("report verdict for SM %d is %s, ModuleVerdict says %s", major, rv.Verdict, v.Verdict)
					}
				}
			}
			for major, want := range tt.reason {
				v := ModuleVerdict(fi, tt.module, major)
				if got := strings.Join(v.Reasons, "; "); !strings.Contains(got, want) {
					t.Errorf("SM %d reasons %q do not mention %q", major, got, want)
				}
			}
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestStaticGateShapes(t *testing.T) {
	r := staticOf(t, "wheel-gate-9-10-12.txtar", "lib/python3.12/site-packages")
	mods := r.FlashInfer.Modules
	tests := []struct {
		name, gate string
		majors     []int
		verdict12  string
		verdict9   string
	}{
		{"ssu", "supported_major_versions", []int{8, 9, 10, 11, 12}, Supported, Supported}, // constant through a helper
		{"gemm_sm120", "supported_major_versions", []int{12}, Supported, UnsupportedGate},  // list over lines
		{"fa2", "supported_major_versions", []int{10, 11, 12}, Supported, Unknown},         // two gates, run-time choice
		{"fp8_quantization", "all", nil, Supported, Supported},                             // None: every target
		{"mystery", "unresolved", nil, Unknown, Unknown},                                   // not a literal
	}
	for _, tt := range tests {
		m := mods[tt.name]
		if m == nil {
			t.Errorf("module %s not found in %v", tt.name, keys(mods))
			continue
		}
		if m.Gate != tt.gate || !reflect.DeepEqual(m.SMMajors, tt.majors) {
			t.Errorf("%s: gate %s %v, want %s %v", tt.name, m.Gate, m.SMMajors, tt.gate, tt.majors)
		}
		if v := ModuleVerdict(r.FlashInfer, tt.name, 12); v.Verdict != tt.verdict12 {
			t.Errorf("%s SM 12: %s %v, want %s", tt.name, v.Verdict, v.Reasons, tt.verdict12)
		}
		if v := ModuleVerdict(r.FlashInfer, tt.name, 9); v.Verdict != tt.verdict9 {
			t.Errorf("%s SM 9: %s %v, want %s", tt.name, v.Verdict, v.Reasons, tt.verdict9)
		}
	}
	if v := ModuleVerdict(r.FlashInfer, "no_such_module", 9); v.Verdict != Unknown {
		t.Errorf("missing module: %s", v.Verdict)
	}
}

func TestStaticPackagesAndFindings(t *testing.T) {
	r := staticOf(t, "wheel-gate-9-10.txtar", "lib/python3.12/site-packages")
	if p := r.Packages["flashinfer-python"]; p == nil || p.Version != "0.6.16.post4" || p.Location != "/lib/python3.12/site-packages" {
		t.Fatalf("flashinfer-python: %+v", p)
	}
	if len(r.Findings) != 1 || r.Findings[0].OK || !strings.Contains(r.Findings[0].Evidence, "flashinfer-jit-cache 0.6.15+cu129") {
		t.Fatalf("jit-cache mismatch finding: %+v", r.Findings)
	}
	r = staticOf(t, "wheel-gate-9-10-12.txtar", "lib/python3.12/site-packages")
	if len(r.Findings) != 2 || !r.Findings[0].OK || !r.Findings[1].OK {
		t.Fatalf("matching versions: %+v", r.Findings)
	}
	if got := r.FlashInfer.SM12CUDAMin; got != "12.9" {
		t.Fatalf("sm12 cuda min %q", got)
	}
}

func TestParseHeaderExclusions(t *testing.T) {
	src := `#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#if __CUDA_ARCH__ >= 800 || !defined(__CUDA_ARCH__)
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ <= 1199
#  if __CUDA_ARCH__ < 1000
#if __CUDA_ARCH__ >= 700 && __CUDA_ARCH__ < 900
// #if __CUDA_ARCH__ < 1200 (a comment)
`
	got := ParseHeaderExclusions("x.cuh", []byte(src))
	want := []HeaderExclusion{
		{File: "x.cuh", Line: 1, Text: "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))", FromMajor: 12},
		{File: "x.cuh", Line: 4, Text: "#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ <= 1199", FromMajor: 12},
		{File: "x.cuh", Line: 5, Text: "#  if __CUDA_ARCH__ < 1000", FromMajor: 10},
		{File: "x.cuh", Line: 6, Text: "#if __CUDA_ARCH__ >= 700 && __CUDA_ARCH__ < 900", FromMajor: 9},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func FuzzParseGenerators(f *testing.F) {
	for _, name := range []string{"wheel-gate-9-10.txtar", "wheel-gate-9-10-12.txtar", "checkout-no-gate.txtar"} {
		a, err := txtar.ParseFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range a.Files {
			if strings.HasSuffix(file.Name, ".py") {
				f.Add(file.Data)
			}
		}
	}
	f.Add([]byte("def gen_x_module(:\n    get_nvcc_flags_list(supported_major_versions=[9,\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mods, err := ParseGenerators(context.Background(), "f.py", data)
		if err != nil {
			t.Fatal(err)
		}
		for name, m := range mods {
			if name == "" || m.Source == "" || m.Gate == "" {
				t.Fatalf("module %q: %+v", name, m)
			}
		}
		ParseHeaderExclusions("f.cuh", data)
	})
}

func TestArchListOverridesDetection(t *testing.T) {
	r := staticOf(t, "wheel-gate-9-10-12.txtar", "lib/python3.12/site-packages")
	r.FlashInfer.ArchList = "9.0a 10.0a"
	v := ModuleVerdict(r.FlashInfer, "trtllm_comm", 12)
	if v.Verdict != UnsupportedGate || !strings.Contains(strings.Join(v.Reasons, "; "), `FLASHINFER_CUDA_ARCH_LIST="9.0a 10.0a"`) {
		t.Fatalf("got %s %v", v.Verdict, v.Reasons)
	}
	for _, list := range []string{"9.0a 12.0f", "10.0 12.1a", "9.0+PTX 12.0"} {
		r.FlashInfer.ArchList = list
		if v := ModuleVerdict(r.FlashInfer, "trtllm_comm", 12); v.Verdict != Supported {
			t.Fatalf("%q listed: %s %v", list, v.Verdict, v.Reasons)
		}
	}
	r.FlashInfer.ArchList = "9.0 sm_twelve 13.0"
	if v := ModuleVerdict(r.FlashInfer, "trtllm_comm", 12); v.Verdict != UnsupportedGate {
		t.Fatalf("no 12.x listed: %s %v", v.Verdict, v.Reasons)
	}
}

// flashinfer installed with pip install -e: site-packages holds only the
// dist-info; its direct_url.json names the checkout the code is read from.
func TestStaticEditableFlashInfer(t *testing.T) {
	fsys := fstest.MapFS{
		"venv/sp/flashinfer_python-0.6.16.post4.dist-info/METADATA":        {Data: []byte("Name: flashinfer-python\nVersion: 0.6.16.post4\n")},
		"venv/sp/flashinfer_python-0.6.16.post4.dist-info/direct_url.json": {Data: []byte(`{"url": "file:///src/flashinfer", "dir_info": {"editable": true}}`)},
		"src/flashinfer/flashinfer/__init__.py":                            {},
		"src/flashinfer/flashinfer/jit/comm.py":                            {Data: []byte("def gen_trtllm_comm_module():\n    nvcc_flags = get_nvcc_flags_list(supported_major_versions=[9, 10])\n    return gen_jit_spec(\"trtllm_comm\", [jit_env.FLASHINFER_CSRC_DIR / \"trtllm_allreduce.cu\"], extra_cuda_cflags=nvcc_flags)\n")},
		"src/flashinfer/include/flashinfer/comm/trtllm_allreduce.cuh":      {Data: []byte("#pragma once\n")},
	}
	r, err := Static(context.Background(), fsys, []string{"/venv/sp"})
	if err != nil {
		t.Fatal(err)
	}
	if r.FlashInfer == nil || r.FlashInfer.Layout != "source" || r.FlashInfer.Modules["trtllm_comm"] == nil {
		t.Fatalf("flashinfer %+v, unknown %v", r.FlashInfer, r.Unknown)
	}
	if v := r.Verdicts["trtllm_comm"]["12"]; v == nil || v.Verdict != "unsupported-gate" {
		t.Fatalf("verdict %+v", v)
	}
}

// callArgsWalk is the walk closers replaces, one per call: from the
// opening bracket to the bracket that closes it.
func callArgsWalk(body string, open int) int {
	end := -1
	walkCode(body, open, func(i int, c byte, depth int) bool {
		if depth == 0 && (c == ')' || c == ']' || c == '}') {
			end = i
			return false
		}
		return true
	})
	return end
}

// closers agrees with a walk from each bracket that is code.
func FuzzClosers(f *testing.F) {
	f.Add("f(a, [b, (c)], 'x)', \"(\")\ng(")
	f.Add("get_nvcc_flags_list(get_nvcc_flags_list(x)")
	f.Add("'(' (\\') ] (")
	f.Fuzz(func(t *testing.T, body string) {
		var opens []int
		walkCode(body, 0, func(i int, c byte, _ int) bool {
			if c == '(' || c == '[' || c == '{' {
				opens = append(opens, i)
			}
			return true
		})
		got := closers(body, opens)
		for k, o := range opens {
			if want := callArgsWalk(body, o); got[k] != want {
				t.Fatalf("bracket at %d: closer %d, want %d", o, got[k], want)
			}
		}
	})
}

// Calls that never close, or close only after all the others, are read in
// time linear in the file: 1.6 MB of them took minutes when each call
// walked to the end of the file.
func TestParseGeneratorsLinear(t *testing.T) {
	n := 6000
	inputs := map[string]string{
		"unclosed": "def gen_x_module():\n    " + strings.Repeat("get_nvcc_flags_list(", n) + "\n",
		"nested":   "def gen_x_module():\n    " + strings.Repeat("get_nvcc_flags_list(", n) + strings.Repeat(")", n) + "\n",
		"specs":    "def gen_x_module():\n    " + strings.Repeat("gen_jit_spec('a', ['x.cu'], ", n) + strings.Repeat(")", n) + "\n",
		"helpers": strings.Repeat("def _h():\n    get_nvcc_flags_list(supported_major_versions=[9])\n", 2000) +
			strings.Repeat("def gen_y_module():\n    _h()\n    gen_jit_spec('y', ['y.cu'])\n", 2000),
	}
	for name, src := range inputs {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			mods, err := ParseGenerators(context.Background(), "comm.py", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("%d bytes took %s", len(src), d)
			}
			if len(mods) == 0 {
				t.Fatal("no module read")
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ParseGenerators(ctx, "comm.py", []byte(inputs["helpers"])); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

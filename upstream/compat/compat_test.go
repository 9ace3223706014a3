package compat

import (
	"bytes"
	_ "embed"
	"slices"
	"strings"
	"testing"
)

//go:embed testdata/table.json
var fixture []byte

func fixtureTable(t *testing.T) *Table {
	t.Helper()
	tb, err := Parse(fixture)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func problemStrings(r *Report) []string {
	var out []string
	for _, f := range r.Problems {
		out = append(out, f.String())
	}
	return out
}

func TestLookups(t *testing.T) {
	tb := fixtureTable(t)
	if s, ok := tb.SGLangAt("0.5.2"); !ok || s.Ref != "v0.5.2" {
		t.Errorf("SGLangAt(0.5.2): %v %v", s, ok)
	}
	if s, ok := tb.SGLangAt("main"); !ok || s.Commit[:2] != "c3" {
		t.Errorf("SGLangAt(main): %v %v", s, ok)
	}
	for _, v := range []string{"0.5.3", "0.5.2.post1", "0.5.2.dev1", "", "not a version"} {
		if _, ok := tb.SGLangAt(v); ok {
			t.Errorf("SGLangAt(%q) found a revision", v)
		}
	}
	if f, ok := tb.FlashInferAt("0.2.0+cu130"); !ok || f.Ref != "v0.2.0" {
		t.Errorf("FlashInferAt(0.2.0+cu130): %v %v", f, ok)
	}
	if p, ok := tb.Pinned("0.5.2"); !ok || p.FlashInfer != "0.1.1" || p.FlashInferFrom != "python/pyproject.toml:5" || p.JITCache != "0.1.1" {
		t.Errorf("Pinned(0.5.2): %+v %v", p, ok)
	}
	if _, ok := tb.Pinned("0.5.9"); ok {
		t.Error("Pinned(0.5.9) found a pin")
	}
	if f, ok := tb.FusionSM12("0.1.1"); !ok || f.Verdict != No || f.Guards != 2 {
		t.Errorf("FusionSM12(0.1.1): %+v %v", f, ok)
	}
	if f, ok := tb.FusionSM12("0.2.0rc1"); !ok || f.Verdict != Yes {
		t.Errorf("FusionSM12(0.2.0rc1): %+v %v", f, ok)
	}
	if _, ok := tb.FusionSM12("0.3.0"); ok {
		t.Error("FusionSM12(0.3.0) found a revision")
	}
	if f, ok := tb.FirstFusion(); !ok || f.Ref != "v0.2.0" {
		t.Errorf("FirstFusion: %v (the final release before its candidate)", f)
	}
}

func TestCheck(t *testing.T) {
	tb := fixtureTable(t)
	tests := []struct {
		sg, fi     string
		ok, pinned bool
		problems   []string
		fusionOK   int
	}{
		// The pin: op takes no scale, new_fusion is not there yet, the
		// optional name is missing (under try).
		{"0.5.2", "0.1.0", false, false, []string{"flashinfer.comm.new_fusion (missing)", "flashinfer.op (keyword scale not taken)", "flashinfer.optional_op (missing, used under try)"}, 1},
		{"0.5.2", "0.1.1", false, true, []string{"flashinfer.op (keyword scale not taken)", "flashinfer.optional_op (missing, used under try)"}, 2},
		// op takes scale; the guarded keyword of new_fusion is not held
		// against it.
		{"0.5.2", "0.2.0rc1", false, false, []string{"flashinfer.optional_op (missing, used under try)"}, 2},
		// **kwargs takes any keyword.
		{"0.5.2", "0.2.0", false, false, []string{"flashinfer.optional_op (missing, used under try)"}, 2},
		{"0.5.1", "0.2.0", false, false, []string{"flashinfer.comm.old_fusion (missing)"}, 1},
		{"0.5.1", "0.1.0", true, true, nil, 2},
		{"main", "main", true, false, nil, 2},
	}
	for _, tc := range tests {
		r, ok := tb.Check(tc.sg, tc.fi)
		if !ok {
			t.Fatalf("Check(%s, %s): not found", tc.sg, tc.fi)
		}
		if got := problemStrings(r); !slices.Equal(got, tc.problems) || r.Pinned != tc.pinned || r.FusionOK != tc.fusionOK || (len(r.Problems) == 0) != tc.ok {
			t.Errorf("Check(%s, %s): problems %q pinned %v fusion ok %d, want %q %v %d", tc.sg, tc.fi, got, r.Pinned, r.FusionOK, tc.problems, tc.pinned, tc.fusionOK)
		}
		if r.OK+len(r.Problems) != r.Symbols {
			t.Errorf("Check(%s, %s): %d ok + %d problems != %d names", tc.sg, tc.fi, r.OK, len(r.Problems), r.Symbols)
		}
	}
	if _, ok := tb.Check("0.5.2", "9.9"); ok {
		t.Error("Check against an unknown flashinfer found a revision")
	}
	r, _ := tb.Check("0.5.2", "0.1.0")
	if s := r.Summary(); !strings.HasPrefix(s, "1 of 4 flashinfer names present as used; not: flashinfer.comm.new_fusion (missing)") {
		t.Errorf("Summary: %s", s)
	}
	if fp := r.FusionProblems(); len(fp) != 1 || fp[0].Symbol != "flashinfer.comm.new_fusion" {
		t.Errorf("FusionProblems: %+v", fp)
	}
}

func TestInstallAndAdvise(t *testing.T) {
	tb := fixtureTable(t)
	r, ok := tb.Install("0.5.2")
	if !ok || r.FlashInfer.Ref != "v0.2.0" {
		t.Fatalf("Install(0.5.2): %+v %v (the final release with the fusion)", r, ok)
	}
	if _, ok := tb.Install("0.5.1"); ok {
		t.Error("Install(0.5.1): its fusion path's old_fusion is gone wherever the fusion builds")
	}
	tests := []struct {
		sg      string
		pin     Pin
		known   bool
		ok      bool
		install string
		says    []string
	}{
		{"0.5.2", Pin{}, true, false, "0.2.0", []string{
			"sglang 0.5.2 pins flashinfer 0.1.1 (python/pyproject.toml:5 at v0.5.2, the compatibility table), which has no SM12x kernel for the fused all-reduce (flashinfer/jit/comm.py:7: supported_major_versions=[9, 10, 12]; 2 `__CUDA_ARCH__ < 1200` guard(s), the first at include/flashinfer/comm/trtllm_allreduce.cuh:2)",
			"; 0.2.0 provides the 2 names its fusion path uses, and no other name it uses fares worse than with its pin (3 of 4 present as used); install flashinfer-python==0.2.0"}},
		{"0.5.1", Pin{}, true, false, "", []string{"no flashinfer revision in the table both builds it and provides the names its fusion path uses (it has 0.1.0 to main)"}},
		{"main", Pin{}, true, true, "", []string{"sglang main pins flashinfer 0.2.0 (python/pyproject.toml:5 at main, the compatibility table), which builds the SM12x fused all-reduce (flashinfer/jit/comm.py:7: supported_major_versions=[9, 10, 12]; no header guard excludes SM12x)"}},
		// A tree the table has no revision of, with the pin it names.
		{"0.5.2.dev3+gabc", Pin{FlashInfer: "0.1.0", FlashInferFrom: "sglang-0.5.2.dev3.dist-info/METADATA"}, true, false, "0.2.0", []string{
			"sglang 0.5.2.dev3+gabc pins flashinfer 0.1.0 (sglang-0.5.2.dev3.dist-info/METADATA), which has no SM12x kernel",
			"0.2.0 is the first flashinfer that builds it (whether it has every name this tree uses is not known: the table has no sglang 0.5.2.dev3+gabc)"}},
		{"0.5.9", Pin{FlashInfer: "0.0.9", FlashInferFrom: "python/pyproject.toml:3"}, false, false, "", []string{"pins flashinfer 0.0.9 (python/pyproject.toml:3), which the compatibility table has no revision of (it has 0.1.0 to main)"}},
		{"0.5.9", Pin{Spec: "flashinfer_python>=0.1", FlashInferFrom: "python/pyproject.toml:3"}, false, false, "", []string{"asks for flashinfer_python>=0.1 (python/pyproject.toml:3), no exact flashinfer version"}},
		{"", Pin{}, false, false, "", []string{"sglang (version unknown): no flashinfer pin read from the tree"}},
	}
	for _, tc := range tests {
		a := tb.Advise(tc.sg, tc.pin)
		if a.Known != tc.known || a.OK != tc.ok || a.Install != tc.install {
			t.Errorf("Advise(%q): known %v ok %v install %q, want %v %v %q (%s)", tc.sg, a.Known, a.OK, a.Install, tc.known, tc.ok, tc.install, a.Text)
		}
		for _, s := range tc.says {
			if !strings.Contains(a.Text, s) {
				t.Errorf("Advise(%q) says\n  %s\nwithout\n  %s", tc.sg, a.Text, s)
			}
		}
	}
}

func TestMarshalReadsBack(t *testing.T) {
	tb := fixtureTable(t)
	a, err := tb.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	tb2, err := Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tb2.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("Marshal of what Marshal wrote differs")
	}
	// One use, one run per line.
	if !bytes.Contains(a, []byte("\n      {\"symbol\":\"flashinfer.op\",\"at\":\"python/sglang/ops.py:1\",\"files\":2,\"kwargs\":[\"out\"]}")) {
		t.Errorf("layout:\n%s", a)
	}
}

func TestParseRefuses(t *testing.T) {
	for name, data := range map[string]string{
		"not JSON":   "{",
		"format":     `{"format": 2}`,
		"a bad run":  `{"format": 1, "flashinfer": [{"ref": "v1"}], "symbols": [{"name": "flashinfer.x", "runs": [{"from": "v1", "to": "v2", "state": "present"}]}]}`,
		"a bad from": `{"format": 1, "flashinfer": [{"ref": "v1"}], "symbols": [{"name": "flashinfer.x", "runs": [{"from": "v0", "to": "v1", "state": "present"}]}]}`,
	} {
		if _, err := Parse([]byte(data)); err == nil || !strings.HasPrefix(err.Error(), "compatibility table: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The table embedded in the binary reads, and answers.
func TestDefault(t *testing.T) {
	tb, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if tb.Sources.Module != "trtllm_comm" || tb.Sources.Major != 12 || len(tb.FlashInfer) == 0 || len(tb.SGLang) == 0 {
		t.Fatalf("embedded table: module %q major %d, %d flashinfer and %d sglang revisions", tb.Sources.Module, tb.Sources.Major, len(tb.FlashInfer), len(tb.SGLang))
	}
	s := tb.SGLang[0]
	if _, ok := Pinned(s.Name()); ok != (s.Pin.FlashInfer != "") {
		t.Errorf("Pinned(%s) = %v", s.Name(), ok)
	}
	if _, ok := FusionSM12(tb.FlashInfer[0].Name()); !ok {
		t.Errorf("FusionSM12(%s) not found", tb.FlashInfer[0].Name())
	}
	if _, ok := Check(s.Name(), tb.FlashInfer[0].Name()); !ok {
		t.Errorf("Check(%s, %s) not found", s.Name(), tb.FlashInfer[0].Name())
	}
	_, _ = Install(s.Name())
	if a := Advise(s.Name(), Pin{}); a.Text == "" {
		t.Error("Advise says nothing")
	}
}

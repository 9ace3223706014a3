package upstream

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smpatch/smpatch/internal/testkit/gitbuild"
	"github.com/smpatch/smpatch/upstream/compat"
)

// Synthetic histories shaped like the two projects, each step one of the
// changes the table must see: the pin moving, the JIT gate widening before
// the header guards go, a name removed and another renamed, a keyword
// added, a fusion file whose names move.

const fiGateOld = `from .core import gen_jit_spec
from ..compilation_context import current_compilation_context


def gen_trtllm_comm_module():
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    )
    return gen_jit_spec(
        "trtllm_comm",
        [jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce.cu"],
        extra_cuda_cflags=nvcc_flags,
    )
`

const fiHeaderGuarded = `#pragma once
#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
__global__ void lamport_kernel() {}
#endif
#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))
__global__ void oneshot_kernel() {}
#endif
`

func fiHistory(t *testing.T, dir string) *gitbuild.Builder {
	t.Helper()
	b, err := gitbuild.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	step := func(msg string, tag string, files map[string][]byte) {
		t.Helper()
		if _, err := b.Commit(msg, files); err != nil {
			t.Fatal(err)
		}
		if tag != "" {
			if err := b.Tag(tag, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	// v0.6.1: the gate in jit/comm.py is [9, 10], the header compiles
	// SM12x out; the old fusion API.
	step("flashinfer 0.6.1", "v0.6.1", map[string][]byte{
		"version.txt":                                  []byte("0.6.1\n"),
		"flashinfer/__init__.py":                       []byte("from . import comm as comm\nfrom .ops import fancy_op as fancy_op\n"),
		"flashinfer/ops.py":                            []byte("def fancy_op(x, out=None):\n    pass\n"),
		"flashinfer/jit/__init__.py":                   []byte(""),
		"flashinfer/jit/comm.py":                       []byte(fiGateOld),
		"flashinfer/comm/__init__.py":                  []byte("from .trtllm_ar import trtllm_allreduce_fusion as trtllm_allreduce_fusion\nfrom .trtllm_ar import AllReduceFusionPattern\n"),
		"flashinfer/comm/trtllm_ar.py":                 []byte("class AllReduceFusionPattern:\n    kARResidualRMSNorm = 0\n\n\ndef trtllm_allreduce_fusion(allreduce_in, world_size, pattern_code=None):\n    pass\n"),
		"include/flashinfer/comm/trtllm_allreduce.cuh": []byte(fiHeaderGuarded),
		"csrc/trtllm_allreduce.cu":                     []byte("#include \"flashinfer/comm/trtllm_allreduce.cuh\"\n"),
	})
	// v0.6.2: the gate admits 12 but the header still compiles it out; the
	// new fusion API; fancy_op takes a new keyword; the old entry point
	// is gone.
	step("flashinfer 0.6.2", "v0.6.2", map[string][]byte{
		"version.txt":                  []byte("0.6.2\n"),
		"flashinfer/jit/comm.py":       []byte(strings.Replace(fiGateOld, "[9, 10]", "[9, 10, 12]", 1)),
		"flashinfer/ops.py":            []byte("def fancy_op(x, out=None, new_kw=False):\n    pass\n"),
		"flashinfer/comm/__init__.py":  []byte("from .allreduce import *\nfrom .trtllm_ar import AllReduceFusionPattern\n"),
		"flashinfer/comm/allreduce.py": []byte("__all__ = ['allreduce_fusion']\n\n\ndef allreduce_fusion(input, workspace, pattern, launch_with_pdl=False):\n    pass\n"),
		"flashinfer/comm/trtllm_ar.py": []byte("class AllReduceFusionPattern:\n    kARResidualRMSNorm = 0\n"),
	})
	// v0.6.3: the header guards go (SM12x builds); fancy_op is renamed.
	step("flashinfer 0.6.3", "v0.6.3", map[string][]byte{
		"version.txt": []byte("0.6.3\n"),
		"include/flashinfer/comm/trtllm_allreduce.cuh": []byte(strings.ReplaceAll(fiHeaderGuarded, " && (__CUDA_ARCH__ < 1200)", "")),
		"flashinfer/__init__.py":                       []byte("from . import comm as comm\nfrom .ops import fancy_op_v2 as fancy_op_v2\n"),
		"flashinfer/ops.py":                            []byte("def fancy_op_v2(x, out=None, new_kw=False):\n    pass\n"),
	})
	step("flashinfer main", "", map[string][]byte{"version.txt": []byte("0.6.4\n")})
	return b
}

func sgPyproject(pin string) []byte {
	return []byte(`[project]
name = "sglang"
dependencies = [
  "torch==2.9.1",
  "flashinfer_python[cu13]==` + pin + `", # keep it aligned with the Dockerfile
  "flashinfer_cubin==` + pin + `",
]
`)
}

const sgFusionOld = `import flashinfer.comm as comm


def fuse(x):
    comm.trtllm_allreduce_fusion(allreduce_in=x, world_size=2, pattern_code=comm.AllReduceFusionPattern.kARResidualRMSNorm)
`

const sgFusionNew = `try:
    import flashinfer.comm as comm
    _comm = comm
except ImportError:
    _comm = None


def fuse(x, ws, trigger):
    kwargs = dict(input=x, workspace=ws, pattern=_comm.AllReduceFusionPattern.kARResidualRMSNorm)
    if trigger:
        kwargs["trigger_completion_at_end"] = True
    _comm.allreduce_fusion(**kwargs)
`

func sgHistory(t *testing.T, dir string) *gitbuild.Builder {
	t.Helper()
	b, err := gitbuild.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	b.When = time.Date(2026, 1, 10, 9, 0, 0, 0, time.UTC)
	step := func(msg, tag string, files map[string][]byte) {
		t.Helper()
		if _, err := b.Commit(msg, files); err != nil {
			t.Fatal(err)
		}
		if tag != "" {
			if err := b.Tag(tag, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	step("start", "", map[string][]byte{"python/pyproject.toml": sgPyproject("0.6.0"), "python/sglang/__init__.py": []byte("")})
	step("Bump flashinfer to 0.6.1", "v0.5.8", map[string][]byte{
		"python/pyproject.toml":                              sgPyproject("0.6.1"),
		"python/sglang/srt/layers/flashinfer_comm_fusion.py": []byte(sgFusionOld),
		"python/sglang/srt/ops.py":                           []byte("from flashinfer import fancy_op\n\n\ndef f(x):\n    return fancy_op(x, out=x)\n"),
		"docker/Dockerfile":                                  []byte("ARG FLASHINFER_VERSION=0.6.1\nRUN pip install flashinfer-jit-cache==${FLASHINFER_VERSION}\n"),
	})
	step("Use the new fusion API and fancy_op's new keyword; flashinfer 0.6.2", "v0.5.9", map[string][]byte{
		"python/pyproject.toml":                              sgPyproject("0.6.2"),
		"python/sglang/srt/layers/flashinfer_comm_fusion.py": []byte(sgFusionNew),
		"python/sglang/srt/ops.py":                           []byte("from flashinfer import fancy_op\n\n\ndef f(x):\n    return fancy_op(x, out=x, new_kw=True)\n"),
		"docker/Dockerfile":                                  []byte("ARG FLASHINFER_VERSION=0.6.2\nRUN pip install flashinfer-jit-cache==${FLASHINFER_VERSION}\n"),
	})
	step("an unrelated change", "", map[string][]byte{"python/sglang/srt/other.py": []byte("x = 1\n")})
	step("Bump flashinfer to 0.6.3 and follow the rename", "", map[string][]byte{
		"python/pyproject.toml":    sgPyproject("0.6.3"),
		"python/sglang/srt/ops.py": []byte("from flashinfer import fancy_op_v2\n\n\ndef f(x):\n    return fancy_op_v2(x, out=x, new_kw=True)\n"),
	})
	return b
}

func generated(t *testing.T) *compat.Table {
	t.Helper()
	dir := t.TempDir()
	fi := fiHistory(t, filepath.Join(dir, "flashinfer.git"))
	sg := sgHistory(t, filepath.Join(dir, "sglang.git"))
	tb, err := GenerateCompat(context.Background(), CompatSources{
		SGLang: sg.Repo, MainBranch: "main", FlashInfer: fi.Repo, FlashInferBranch: "main",
		SGLangFirst: "0.5.8", FlashInferFirst: "0.6.0", Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestGenerateCompatSynthetic(t *testing.T) {
	tb := generated(t)
	var fis []string
	for _, f := range tb.FlashInfer {
		fis = append(fis, f.Ref+":"+f.Fusion.Verdict)
	}
	if want := []string{"v0.6.1:no", "v0.6.2:no", "v0.6.3:yes", "main:yes"}; !slices.Equal(fis, want) {
		t.Fatalf("flashinfer revisions and verdicts %v, want %v", fis, want)
	}
	if f := tb.FlashInfer[0].Fusion; f.Gate != "flashinfer/jit/comm.py:7: supported_major_versions=[9, 10]" || f.Guards != 2 || f.GuardAt != "include/flashinfer/comm/trtllm_allreduce.cuh:2" {
		t.Errorf("v0.6.1 fusion evidence: %+v", f)
	}
	// The gate widened alone is not enough: the header still excludes.
	if f := tb.FlashInfer[1].Fusion; !strings.Contains(f.Gate, "[9, 10, 12]") || f.Guards != 2 {
		t.Errorf("v0.6.2 fusion evidence: %+v", f)
	}
	var sgs []string
	for _, s := range tb.SGLang {
		sgs = append(sgs, s.Ref+":"+s.Pin.FlashInfer)
	}
	if want := []string{"v0.5.8:0.6.1", "v0.5.9:0.6.2", "main:0.6.3"}; !slices.Equal(sgs, want) {
		t.Fatalf("sglang revisions and pins %v, want %v", sgs, want)
	}
	p := tb.SGLang[0].Pin
	if p.FlashInferFrom != "python/pyproject.toml:5" || p.Cubin != "0.6.1" || p.JITCache != "0.6.1" || !strings.HasPrefix(p.JITCacheFrom, "docker/Dockerfile:2") {
		t.Errorf("v0.5.8 pin: %+v", p)
	}
	var pins []string
	for _, c := range tb.MainPins {
		pins = append(pins, c.FlashInfer+" "+c.Subject)
	}
	if want := []string{"0.6.1 Bump flashinfer to 0.6.1", "0.6.2 Use the new fusion API and fancy_op's new keyword; flashinfer 0.6.2", "0.6.3 Bump flashinfer to 0.6.3 and follow the rename"}; !slices.Equal(pins, want) {
		t.Errorf("main's pin history %q, want %q", pins, want)
	}

	check := func(sg, fi string) *compat.Report {
		t.Helper()
		r, ok := tb.Check(sg, fi)
		if !ok {
			t.Fatalf("Check(%s, %s): not in the table", sg, fi)
		}
		return r
	}
	problems := func(r *compat.Report) []string {
		var out []string
		for _, f := range r.Problems {
			out = append(out, f.String())
		}
		return out
	}
	// v0.5.8 on its pin: everything there.
	if r := check("0.5.8", "0.6.1"); len(r.Problems) != 0 || !r.Pinned || r.FusionSymbols != 3 {
		t.Errorf("0.5.8 on 0.6.1: %s (fusion names %d)", r.Summary(), r.FusionSymbols)
	}
	// v0.5.8 on 0.6.2: the old entry point was removed.
	if got := problems(check("0.5.8", "0.6.2")); !slices.Equal(got, []string{"flashinfer.comm.trtllm_allreduce_fusion (missing)"}) {
		t.Errorf("0.5.8 on 0.6.2: %q", got)
	}
	// v0.5.9 on 0.6.1: the new API is not there yet, fancy_op takes no
	// new_kw; the guarded keyword is not held against it.
	if got := problems(check("0.5.9", "0.6.1")); !slices.Equal(got, []string{"flashinfer.comm.allreduce_fusion (missing)", "flashinfer.fancy_op (keyword new_kw not taken)"}) {
		t.Errorf("0.5.9 on 0.6.1: %q", got)
	}
	// v0.5.9 on 0.6.3: fancy_op was renamed.
	if got := problems(check("0.5.9", "0.6.3")); !slices.Equal(got, []string{"flashinfer.fancy_op (missing)"}) {
		t.Errorf("0.5.9 on 0.6.3: %q", got)
	}
	if r := check("main", "main"); len(r.Problems) != 0 {
		t.Errorf("main on main: %s", r.Summary())
	}

	// The advice apply --check-arch prints.
	a := tb.Advise("0.5.9", compat.Pin{})
	if a.OK || a.Install != "0.6.3" {
		t.Fatalf("Advise(0.5.9): %+v", a)
	}
	for _, want := range []string{
		"sglang 0.5.9 pins flashinfer 0.6.2 (python/pyproject.toml:5 at v0.5.9, the compatibility table), which has no SM12x kernel",
		"2 `__CUDA_ARCH__ < 1200` guard(s), the first at include/flashinfer/comm/trtllm_allreduce.cuh:2",
		"0.6.3 provides the 3 names its fusion path uses, and 1 other import(s) changed: flashinfer.fancy_op (missing)",
		"install flashinfer-python==0.6.3",
	} {
		if !strings.Contains(a.Text, want) {
			t.Errorf("Advise(0.5.9) says\n  %s\nwithout %q", a.Text, want)
		}
	}
	// v0.5.8's fusion path needs the entry point 0.6.3 removed.
	if a := tb.Advise("0.5.8", compat.Pin{}); a.OK || a.Install != "" || !strings.Contains(a.Text, "no flashinfer revision in the table both builds it and provides the names its fusion path uses") {
		t.Errorf("Advise(0.5.8): %+v", a)
	}
	if a := tb.Advise("main", compat.Pin{}); !a.OK || !strings.Contains(a.Text, "which builds the SM12x fused all-reduce") {
		t.Errorf("Advise(main): %+v", a)
	}

	md := string(CompatMarkdown(tb, "sglang v9.9.9"))
	for _, want := range []string{
		"- not reachable here: sglang v9.9.9;",
		"| v0.6.3 … main (2) |",
		"| v0.5.9 | 2026-01-10 | 0.6.2 (`python/pyproject.toml:5`) | 0.6.2 | 0.6.2 | no |",
		"| v0.5.8 | **pin** 4/4 · 3/3 | 3/4 · 2/3 |",
		"  - `flashinfer.fancy_op` at `python/sglang/srt/ops.py:1`: missing",
		"| `",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("docs/compatibility.md lacks %q:\n%s", want, md)
		}
	}
}

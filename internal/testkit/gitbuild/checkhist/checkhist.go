package checkhist

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/smpatch/smpatch/internal/testkit/gitbuild"
)

const gateFunc = `def gen_trtllm_comm_module() -> JitSpec:
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    )
    return gen_jit_spec(
        "trtllm_comm",
        [
            jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce.cu",
            jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce_fusion.cu",
        ],
        extra_cuda_cflags=nvcc_flags,
    )
`

const catalogTOML = `name = "trtllm-comm-sm12"
project = "flashinfer"
summary = "Admit SM12x in the trtllm_comm JIT gate"

[[variant]]
name = "jit-comm"
versions = ">= 0.6.0"
diffs = ["trtllm-comm-sm12/gate.diff"]
`

func genFunc(i, salt int) string {
	return fmt.Sprintf(`def gen_module_%d() -> JitSpec:
    # generated module %d (revision %d)
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10, 11, 12]
    )
    return gen_jit_spec(
        "module_%d",
        [jit_env.FLASHINFER_CSRC_DIR / "module_%d.cu"],
        extra_cuda_cflags=nvcc_flags,
    )

`, i, i, salt, i, i)
}

type file struct {
	head   string
	before []string // functions above the gate
	gate   string
	after  []string
}

func (f *file) String() string {
	return f.head + strings.Join(f.before, "") + "\n" + f.gate + "\n\n" + strings.Join(f.after, "")
}

// Options shape a history.
type Options struct {
	Commits int    // commits after the first (the release v0.6.0)
	Size    int    // approximate size of the target file in bytes
	Touch   int    // percent of commits that change the target file
	Seed    uint64 // random seed: the same options give the same history
	// Fuzzy renames the patched function's header (a context line of the
	// hunk) at commit Commits/5 and back at 2*Commits/5, so that the patch
	// only matches by similarity in between.
	Fuzzy bool
	// PostEvery, when set, makes every PostEvery-th commit a post release
	// that changes only version.txt (0.6.N.postC): a watched file changes
	// while the target does not.
	PostEvery int
}

// Info says what Generate wrote.
type Info struct {
	Repo    string // the bare repository, out/repo.git
	Catalog string // the catalog directory with the patch, out/catalog
	URL     string // file:// URL of Repo
	Last    string // the last release tag, v0.6.<Commits/100>
	// BreakAt and AdoptAt are the commits (counted from 1 after v0.6.0)
	// that break the patch's hunk and adopt the patch.
	BreakAt, AdoptAt int
	TargetSize       int // bytes of the target file at the end
}

// Generate writes the history into out/repo.git and the catalog into
// out/catalog; out must not exist.
func Generate(out string, o Options) (Info, error) {
	commits, size, touch, seed := o.Commits, o.Size, o.Touch, o.Seed
	if size <= 0 {
		size = 250_000
	}
	if _, err := os.Stat(out); err == nil {
		return Info{}, fmt.Errorf("%s exists", out)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b, err := gitbuild.New(filepath.Join(out, "repo.git"))
	if err != nil {
		return Info{}, err
	}
	f := &file{head: "import os\n\nfrom . import env as jit_env\nfrom .core import JitSpec, gen_jit_spec\nfrom ..compilation_context import current_compilation_context\n\n\n", gate: gateFunc}
	n := 0
	for len(f.String()) < size {
		if n%2 == 0 {
			f.before = append(f.before, genFunc(n, 0))
		} else {
			f.after = append(f.after, genFunc(n, 0))
		}
		n++
	}
	// The patch, made against the first commit's file.
	orig := f.String()
	lines := strings.SplitAfter(orig, "\n")
	gl := 0
	for i, l := range lines {
		if strings.Contains(l, "supported_major_versions=[9, 10]\n") && !strings.Contains(l, "11") {
			gl = i + 1
			break
		}
	}
	start := gl - 3
	var d strings.Builder
	fmt.Fprintf(&d, "diff --git a/flashinfer/jit/comm.py b/flashinfer/jit/comm.py\n--- a/flashinfer/jit/comm.py\n+++ b/flashinfer/jit/comm.py\n")
	fmt.Fprintf(&d, "@@ -%d,7 +%d,7 @@\n", start, start)
	for i := start; i < start+7; i++ {
		l := lines[i-1]
		if i == gl {
			fmt.Fprintf(&d, "-%s+%s", l, strings.Replace(l, "[9, 10]", "[9, 10, 12]", 1))
			continue
		}
		fmt.Fprintf(&d, " %s", l)
	}
	cat := filepath.Join(out, "catalog")
	if err := os.MkdirAll(filepath.Join(cat, "trtllm-comm-sm12"), 0o755); err != nil {
		return Info{}, err
	}
	if err := os.WriteFile(filepath.Join(cat, "trtllm-comm-sm12.toml"), []byte(catalogTOML), 0o644); err != nil {
		return Info{}, err
	}
	if err := os.WriteFile(filepath.Join(cat, "trtllm-comm-sm12", "gate.diff"), []byte(d.String()), 0o644); err != nil {
		return Info{}, err
	}

	// Other files, so a checkout has something besides the target to write.
	first := map[string][]byte{
		"version.txt":            []byte("0.6.0\n"),
		"flashinfer/__init__.py": []byte("from .version import __version__\n"),
		"flashinfer/jit/comm.py": []byte(orig),
	}
	for i := 0; i < 40; i++ {
		first[fmt.Sprintf("csrc/kernel_%02d.cu", i)] = []byte(strings.Repeat(fmt.Sprintf("// kernel %d\n__global__ void k%d() {}\n", i, i), 200))
	}
	if _, err := b.Commit("release 0.6.0", first); err != nil {
		return Info{}, err
	}
	if err := b.Tag("v0.6.0", true); err != nil {
		return Info{}, err
	}
	breakAt, adoptAt := commits*3/5, commits*17/20
	for c := 1; c <= commits; c++ {
		ch := map[string][]byte{}
		msg := ""
		switch {
		case o.Fuzzy && c == commits/5:
			f.gate = strings.Replace(f.gate, "def gen_trtllm_comm_module() -> JitSpec:", "def gen_trtllm_comm_module(arch_list=None) -> JitSpec:", 1)
			msg = fmt.Sprintf("style: name the arch list (#%d)", 1000+c)
		case o.Fuzzy && c == 2*commits/5:
			f.gate = strings.Replace(f.gate, "def gen_trtllm_comm_module(arch_list=None) -> JitSpec:", "def gen_trtllm_comm_module() -> JitSpec:", 1)
			msg = fmt.Sprintf("revert: name the arch list (#%d)", 1000+c)
		case c == breakAt:
			f.gate = strings.Replace(f.gate, "[9, 10]\n", "[9, 10, 11]\n", 1)
			msg = fmt.Sprintf("feat: SM11x in trtllm_comm (#%d)", 1000+c)
		case c == adoptAt:
			f.gate = strings.Replace(f.gate, "[9, 10, 11]\n", "[9, 10, 12]\n", 1)
			msg = fmt.Sprintf("feat(comm): extend trtllm_allreduce to SM12x (#%d)", 1000+c)
		case rng.IntN(100) < touch:
			// Drift: add a function above or below the gate, or edit one.
			switch rng.IntN(3) {
			case 0:
				f.before = append(f.before, genFunc(n, c))
				n++
			case 1:
				f.after = append([]string{genFunc(n, c)}, f.after...)
				n++
			default:
				i := rng.IntN(len(f.before))
				f.before[i] = genFunc(1_000_000+i, c)
			}
			msg = fmt.Sprintf("feat: module %d (#%d)", n, 1000+c)
		default:
			k := rng.IntN(40)
			ch[fmt.Sprintf("csrc/kernel_%02d.cu", k)] = []byte(strings.Repeat(fmt.Sprintf("// kernel %d rev %d\n__global__ void k%d() {}\n", k, c, k), 200))
			msg = fmt.Sprintf("perf: kernel %d (#%d)", k, 1000+c)
		}
		if msg != "" && !strings.HasPrefix(msg, "perf") {
			ch["flashinfer/jit/comm.py"] = []byte(f.String())
		}
		if o.PostEvery > 0 && c%o.PostEvery == 0 {
			ch["version.txt"] = []byte(fmt.Sprintf("0.6.%d.post%d\n", c/100, c))
		}
		if c%100 == 0 {
			ch["version.txt"] = []byte(fmt.Sprintf("0.6.%d\n", c/100))
		}
		if _, err := b.Commit(msg, ch); err != nil {
			return Info{}, err
		}
		if c%100 == 0 {
			if err := b.Tag(fmt.Sprintf("v0.6.%d", c/100), false); err != nil {
				return Info{}, err
			}
		}
	}
	return Info{
		Repo: b.Dir, Catalog: cat, URL: b.URL(), Last: fmt.Sprintf("v0.6.%d", commits/100),
		BreakAt: breakAt, AdoptAt: adoptAt, TargetSize: len(f.String()),
	}, nil
}

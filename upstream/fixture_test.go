package upstream

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/smpatch/smpatch/internal/testkit/gitbuild"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/catalog"
)

// fixture is the history of testdata/trtllm-gate.txtar built with go-git.
type fixture struct {
	b       *gitbuild.Builder
	commits map[string]plumbing.Hash
	patches []*patches.Patch
}

const (
	gate     = "        supported_major_versions=[9, 10]\n"
	gate11   = "        supported_major_versions=[9, 10, 11]\n"
	gate12   = "        supported_major_versions=[9, 10, 12]\n"
	ctxLine  = "def gen_trtllm_comm_module() -> JitSpec:\n"
	ctxFuzzy = "def gen_trtllm_comm_module(arch_list=None) -> JitSpec:\n"
	drift    = "\n\ndef gen_mnnvl_module() -> JitSpec:\n    return gen_jit_spec(\n        \"mnnvl\",\n        [jit_env.FLASHINFER_CSRC_DIR / \"mnnvl.cu\"],\n    )\n"
)

func newFixture(t testing.TB) *fixture {
	t.Helper()
	ar, err := txtar.ParseFile("testdata/trtllm-gate.txtar")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	cat := t.TempDir()
	for _, f := range ar.Files {
		files[f.Name] = string(f.Data)
		if rel, ok := strings.CutPrefix(f.Name, "catalog/"); ok {
			p := filepath.Join(cat, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ps, err := catalog.LoadFS(os.DirFS(cat), cat, cat)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gitbuild.New(filepath.Join(t.TempDir(), "flashinfer.git"))
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{b: b, commits: map[string]plumbing.Hash{}, patches: ps}
	comm := files["comm.py"]
	insertAfterNvshmem := func(s string) string {
		i := strings.Index(s, "\n\n\ndef gen_trtllm_comm_module")
		return s[:i] + "\n" + drift + s[i:]
	}
	steps := []struct {
		name, msg string
		files     map[string]string
		tag       string
	}{
		{"v0.6.0", "release 0.6.0", map[string]string{"version.txt": "0.6.0\n", "flashinfer/jit/comm.py": comm, "README.md": "flashinfer\n"}, "v0.6.0"},
		{"docs", "docs: readme", map[string]string{"README.md": "flashinfer: kernels\n"}, ""},
		{"drift", "feat: mnnvl module (#100)", map[string]string{"flashinfer/jit/comm.py": insertAfterNvshmem(comm)}, ""},
		{"rc", "release 0.6.1rc1", map[string]string{"version.txt": "0.6.1rc1\n"}, "v0.6.1rc1"},
		{"fuzzy", "style: name the module (#101)", map[string]string{"flashinfer/jit/comm.py": strings.Replace(insertAfterNvshmem(comm), ctxLine, ctxFuzzy, 1)}, ""},
		{"conflict", "feat: SM11x in trtllm_comm (#102)", map[string]string{"flashinfer/jit/comm.py": strings.Replace(insertAfterNvshmem(comm), gate, gate11, 1)}, ""},
		{"docs2", "docs: more", map[string]string{"README.md": "flashinfer: kernels for LLM serving\n"}, ""},
		{"adopt", "feat(comm): extend trtllm_allreduce to SM12x (#3903)", map[string]string{"flashinfer/jit/comm.py": strings.Replace(insertAfterNvshmem(comm), gate, gate12, 1)}, ""},
		{"post", "release 0.6.2.post1", map[string]string{"version.txt": "0.6.2.post1\n"}, "v0.6.2.post1"},
	}
	for _, s := range steps {
		ch := map[string][]byte{}
		for k, v := range s.files {
			ch[k] = []byte(v)
		}
		h, err := b.Commit(s.msg, ch)
		if err != nil {
			t.Fatal(err)
		}
		fx.commits[s.name] = h
		if s.tag != "" {
			if err := b.Tag(s.tag, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	return fx
}

package doctor

import (
	"context"
	"os"
	"testing"

	"github.com/smpatch/smpatch/source"
)

// BenchmarkParseServerArgs reads a real server_args.py when
// SMPATCH_SERVER_ARGS names one (the largest sglang file doctor reads),
// else the synthetic tree's.
func BenchmarkParseServerArgs(b *testing.B) {
	var data []byte
	if p := os.Getenv("SMPATCH_SERVER_ARGS"); p != "" {
		var err error
		if data, err = os.ReadFile(p); err != nil {
			b.Fatal(err)
		}
	} else {
		tree, _ := synthTree(b, "annotated")
		data, _ = tree.ReadFile(ServerArgsFile)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseServerArgs(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRun is one whole doctor pass on SMPATCH_DOCTOR_TREE (a real
// sglang checkout) or the synthetic tree, with a saved report's host.
func BenchmarkRun(b *testing.B) {
	var tree source.Tree
	if p := os.Getenv("SMPATCH_DOCTOR_TREE"); p != "" {
		t, err := source.OpenCheckout(p)
		if err != nil {
			b.Fatal(err)
		}
		tree = t
	} else {
		tree, _ = synthTree(b, "annotated")
	}
	rules, err := Rules()
	if err != nil {
		b.Fatal(err)
	}
	host := pcieHost(8, "12.0", "NVIDIA RTX PRO 6000 Blackwell Server Edition", deepGemmPkgs)
	model := writeModel(b, fp8MoE)
	in := Inputs{Tree: tree, Host: host, Env: map[string]string{},
		Launch: []string{"python", "-m", "sglang.launch_server", "--model-path", model, "--tp", "8", "--enable-flashinfer-allreduce-fusion"}}
	for b.Loop() {
		if _, err := Run(context.Background(), in, rules); err != nil {
			b.Fatal(err)
		}
	}
}

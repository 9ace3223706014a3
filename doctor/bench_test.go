package doctor

import (
	"os"
	"testing"
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

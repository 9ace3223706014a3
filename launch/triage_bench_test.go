package launch

import (
	"bytes"
	"fmt"
	"testing"
)

// BenchmarkTriage triages a long, healthy-looking server log with one fatal
// line near its end (bench/launch.bench.sh runs the same beside grep).
func BenchmarkTriage(b *testing.B) {
	var buf bytes.Buffer
	for i := 1; i <= 200000; i++ {
		fmt.Fprintf(&buf, "[2026-03-02 10:%02d:%02d TP%d] Decode batch. #running-req: 1, #token: %d, token usage: 0.01, gen throughput (token/s): 89.50, #queue-req: 0\n", (i/60)%60, i%60, i%8, i)
		if i == 199000 {
			buf.WriteString("RuntimeError: No supported CUDA architectures found for major versions [9, 10].\n")
		}
	}
	data := buf.Bytes()
	s := DefaultSignatures()
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		v, err := s.Triage("x.log", bytes.NewReader(data))
		if err != nil || !v.Known {
			b.Fatal(err, v)
		}
	}
}

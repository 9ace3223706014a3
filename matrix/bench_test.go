package matrix

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// benchSizes make a 10-axis matrix of 4·4·4·4·4·3·3·3·2·2 = 110592 raw cells.
var benchSizes = []int{4, 4, 4, 4, 4, 3, 3, 3, 2, 2}

// BenchMatrix writes the benchmark matrix and a file of 44 rules (more with
// the built-in ones) into dir and returns the matrix path. With keepAll the
// matrix has no exclude entries; otherwise excludes keep about a quarter.
func BenchMatrix(dir string, keepAll bool) (string, error) {
	var b strings.Builder
	b.WriteString("name = \"bench\"\nmax_cells = 200000\nrules = [\"rules.toml\"]\n[axes]\n")
	b.WriteString("patches = [[], [\"sm120-fusion\"], [\"a\"], [\"a\", \"b\"]]\n")
	b.WriteString("nccl = [\"default\", \"fewchan\", \"tree\", \"ll128\"]\n")
	for i, n := range benchSizes[2:] {
		var vals []string
		for v := 0; v < n; v++ {
			vals = append(vals, fmt.Sprint(v*64+64))
		}
		fmt.Fprintf(&b, "x%d = [%s]\n", i, strings.Join(vals, ", "))
	}
	b.WriteString(`[presets.nccl.default]
NCCL_MIN_NCHANNELS = "16"
NCCL_BUFFSIZE = "16777216"
[presets.nccl.fewchan]
NCCL_PROTO = "LL"
NCCL_ALGO = "Ring"
NCCL_MAX_NCHANNELS = "2"
NCCL_BUFFSIZE = "131072"
[presets.nccl.tree]
NCCL_ALGO = "Tree"
[presets.nccl.ll128]
NCCL_PROTO = "LL128"
"--disable-cuda-graph" = true
`)
	if !keepAll {
		b.WriteString("[[exclude]]\nx0 = [64, 128]\nx1 = [64, 128, 192]\n")
		b.WriteString("[[exclude]]\nx2 = 64\n")
		b.WriteString("[[exclude]]\npatches = [[\"a\"], [\"a\", \"b\"]]\nx5 = 64\n")
	}
	b.WriteString(`[[include]]
patches = ["sm120-fusion"]
args = ["--enable-flashinfer-allreduce-fusion"]
[launch]
command = ["python3", "-m", "sglang.launch_server", "--tp", "8", "--mem-fraction-static", "0.55",
  "--cuda-graph-max-bs", "{{.x0}}", "--max-running-requests", "{{.x1}}", "--chunked-prefill-size", "{{.x2}}",
  "--x3", "{{.x3}}", "--x4", "{{.x4}}", "--x5", "{{.x5}}", "--x6", "{{.x6}}", "--x7", "{{.x7}}"]
env = { SMPATCH_CELL = "{{.id}}" }
health = "http://127.0.0.1:30000/health"
`)
	var r strings.Builder
	r.WriteString("version = 1\n")
	for i := 0; i < 44; i++ {
		action := "warn"
		if i%4 == 0 {
			action = "prune"
		}
		fmt.Fprintf(&r, "[[rule]]\nname = \"r%d\"\naction = %q\nreason = \"bench rule %d\"\nsource = \"https://example.com/%d\"\n[rule.when]\n", i, action, i, i)
		switch i % 4 {
		case 0:
			fmt.Fprintf(&r, "axis = { x%d = %d, x%d = [%d, %d] }\n", i%8, 64*(1+i%2), (i+1)%8, 64, 128)
		case 1:
			fmt.Fprintf(&r, "env = { NCCL_PROTO = \"LL\" }\nflags = [\"--x%d\"]\n", i%8)
		case 2:
			fmt.Fprintf(&r, "patches = [\"a\"]\nflag_values = { \"--x%d\" = \"128\" }\n", i%8)
		case 3:
			fmt.Fprintf(&r, "cuda_graphs = true\nvaries = [\"NCCL_BUFFSIZE\"]\naxis = { x%d = 64 }\n", i%8)
		}
	}
	p := filepath.Join(dir, "bench.toml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return p, os.WriteFile(filepath.Join(dir, "rules.toml"), []byte(r.String()), 0o644)
}

func benchmarkExpand(b *testing.B, keepAll bool) {
	dir := b.TempDir()
	p, err := BenchMatrix(dir, keepAll)
	if err != nil {
		b.Fatal(err)
	}
	m, err := Load(p)
	if err != nil {
		b.Fatal(err)
	}
	var x *Expansion
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if x, err = m.Expand(ExpandOptions{MaxCells: 200000}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	builtin, err := DefaultRules(m)
	if err != nil {
		b.Fatal(err)
	}
	if len(x.Rules) != 44+len(builtin) || x.Steps.Product != 110592 {
		b.Fatalf("%d rules (want 44 and the %d built-in ones), %d raw cells", len(x.Rules), len(builtin), x.Steps.Product)
	}
	b.ReportMetric(float64(x.Steps.Product), "raw-cells")
	b.ReportMetric(float64(len(x.Cells)), "kept-cells")
	b.ReportMetric(float64(x.Steps.Pruned), "pruned-cells")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/(1<<20), "MiB-alloc/op")
}

// BenchmarkExpand: 10 axes, 110592 raw cells, 44 rules and the built-in ones, excludes keeping
// about a quarter of the cells.
func BenchmarkExpand(b *testing.B) { benchmarkExpand(b, false) }

// BenchmarkExpandAll keeps every raw cell.
func BenchmarkExpandAll(b *testing.B) { benchmarkExpand(b, true) }

func TestBenchMatrixLoads(t *testing.T) {
	p, err := BenchMatrix(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Axes) != 10 || len(m.rules) != 44 {
		t.Fatalf("%d axes, %d rules", len(m.Axes), len(m.rules))
	}
}

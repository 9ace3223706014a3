package launch

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// reportSummary is a run with repeats, a failure with its triage line and
// a pruned cell, shaped like the story's matrix.
func reportSummary(cells int) *Summary {
	s := &Summary{Name: "story", Runner: "local", Baseline: "unpatched.default.cgbs512", Metrics: []string{"output tok/s"}, Repeat: 5,
		Meta: &RunMeta{Started: "2026-12-02T10:00:00Z", Finished: "2026-12-02T11:30:00Z", Host: "gpu-host-1",
			GPUs: "8 x NVIDIA RTX PRO 6000 Blackwell Server Edition (sm 12.0, nvidia-smi)", Smpatch: "v0.9.0 (0123456789ab)",
			Tree: "/home/u/src/sglang", TreeVersion: "0.5.17", TreeRevision: "3f1c2a9d0e7b", Patches: []string{"sm120-fusion"}}}
	for i := range cells {
		nccl := []string{"default", "fewchan"}[i%2]
		bs := []string{"512", "128"}[(i/2)%2]
		id := fmt.Sprintf("unpatched.%s.cgbs%s", nccl, bs)
		if i >= 4 {
			id = fmt.Sprintf("p%d.%s.cgbs%s", i/4, nccl, bs)
		}
		r := &Result{ID: id, Values: []AxisValue{{"patches", "[]"}, {"nccl", nccl}, {"cuda_graph_max_bs", bs}},
			Launch: "python3 -m sglang.launch_server --tp 8 --cuda-graph-max-bs " + bs, Log: "logs/" + id + ".log"}
		switch {
		case i == 1:
			r.Status, r.Reason = StatusFailed, "fatal log line before the server was healthy"
			r.Triage = &Match{Label: "kv-pool-no-memory", Line: 6, Text: "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."}
		case i == 5:
			r.Status, r.Reason = StatusPruned, "nccl-tree-cuda-graphs: NCCL_ALGO=Tree breaks CUDA graph capture (https://example.invalid/rule)"
		default:
			for k := 1; k <= 5; k++ {
				v := 82 + float64(i%4)*3 + float64(k%3)*0.7
				r = addSample(r, &Result{ID: id, Status: StatusOK, Metrics: map[string]float64{"output tok/s": v}, Log: r.Log, Values: r.Values, Launch: r.Launch}, k)
			}
		}
		s.Results = append(s.Results, r)
	}
	s.count()
	s.computeDeltas()
	return s
}

func TestWriteHTML(t *testing.T) {
	s := reportSummary(8)
	s.Results[2].ID = `x<script>alert(1)</script>`
	var buf bytes.Buffer
	if err := s.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"<svg", `id="chart-0"`, "kv-pool-no-memory", "RuntimeError: Not enough memory",
		"nccl-tree-cuda-graphs", "python3 -m sglang.launch_server --tp 8", "nccl=fewchan", "distinguishable from noise", "A/B against unpatched.default.cgbs512",
		// the run's metadata
		"<dt>host</dt><dd>gpu-host-1 (local runner)</dd>", "8 x NVIDIA RTX PRO 6000", "v0.9.0 (0123456789ab)", "version 0.5.17, commit 3f1c2a9d0e7b",
		"2026-12-02T10:00:00Z to 2026-12-02T11:30:00Z (1h30m0s)", "<dd>sm120-fusion</dd>",
		// the unit everywhere, never "metric"
		"<h2>output tok/s</h2>", "output tok/s: median of 5 runs", "<th>output tok/s</th>",
		// failed and pruned cells in the chart, with their reason
		`class="st">✕ failed: kv-pool-no-memory</text>`, `class="st">– pruned: nccl-tree-cuda-graphs</text>`,
		// a link to each log, in the chart and in the table
		`<a href="logs/unpatched.default.cgbs128.log"><text`, `<a href="logs/unpatched.default.cgbs128.log"><code>`,
		// the verdict beside its bar, the value and interval on it
		`class="vd">baseline</text>`, "vs baseline: real, p", `class="val">`} {
		if !strings.Contains(out, want) {
			t.Errorf("results.html lacks %q", want)
		}
	}
	if strings.Contains(out, "<script>alert") {
		t.Error("a cell id went into the page unescaped")
	}
	// Self-contained: nothing is loaded from anywhere at view time.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:|//)|@import|url\(\s*["']?https?:`).FindString(out); m != "" {
		t.Errorf("results.html loads %q", m)
	}
}

// chromium returns the headless browser to test with: $SMPATCH_TEST_CHROMIUM,
// else chromium on PATH. Without one the test is skipped, loudly, unless
// SMPATCH_REQUIRE_SERVICES=1 (CI) makes it fail.
func chromium(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("SMPATCH_TEST_CHROMIUM")
	if bin == "" {
		bin, _ = exec.LookPath("chromium")
	}
	if bin == "" {
		msg := "SKIP (no chromium): install Debian's chromium (scripts/services.sh up chromium), or set SMPATCH_TEST_CHROMIUM"
		if os.Getenv("SMPATCH_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

func headless(t *testing.T, bin string, args ...string) (stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, e.String())
	}
	return o.String(), e.String()
}

// The report in a real headless Chromium: it loads without console or
// network errors and the chart is in the rendered page.
func TestHTMLInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, ResultsHTML)
	var buf bytes.Buffer
	if err := reportSummary(8).WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, logs := headless(t, bin, "--dump-dom", "file://"+page)
	for _, want := range []string{`id="chart-0"`, "<svg", "unpatched.fewchan.cgbs512", "kv-pool-no-memory", "✕ failed"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	for _, bad := range []string{"Uncaught", "net::ERR_", ":CONSOLE", "Failed to load"} {
		if strings.Contains(logs, bad) {
			t.Errorf("browser log has %q:\n%s", bad, logs)
		}
	}
	shot := filepath.Join(dir, "shot.png")
	headless(t, bin, "--screenshot="+shot, "--window-size=1280,1100", "--hide-scrollbars", "file://"+page)
	png, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("no screenshot: %v", err)
	}
	if dst := os.Getenv("SMPATCH_SCREENSHOT"); dst != "" {
		os.WriteFile(dst, png, 0o644)
	}
}

// A report of 1,000 cells (5 runs each, two metrics, a baseline) stays
// small enough to mail: every cell in both charts and the table.
func TestHTMLSize1000(t *testing.T) {
	s := reportSummary(1000)
	s.Metrics = append(s.Metrics, "TTFT s")
	for _, r := range s.Results {
		if v, ok := r.Metrics["output tok/s"]; ok {
			r.Metrics["TTFT s"] = 64 / v
		}
	}
	var buf bytes.Buffer
	if err := s.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), `<g class="row `); n != 2000 {
		t.Errorf("%d chart rows, want 2000 (1,000 cells in each of 2 charts)", n)
	}
	const limit = 2 << 20
	t.Logf("results.html for 1,000 cells, 2 metrics: %d bytes", buf.Len())
	if buf.Len() > limit {
		t.Errorf("results.html for 1,000 cells is %d bytes, over %d", buf.Len(), limit)
	}
}

// BenchmarkReport1000 writes every results file (json, csv, md, junit,
// html) for 1,000 cells of 5 repeats each.
func BenchmarkReport1000(b *testing.B) {
	s := reportSummary(1000)
	dir := b.TempDir()
	b.ResetTimer()
	for range b.N {
		if err := s.WriteFiles(dir, ""); err != nil {
			b.Fatal(err)
		}
	}
}

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
	s := &Summary{Name: "story", Runner: "local", Baseline: "unpatched.default.cgbs512", Metrics: []string{"throughput"}, Repeat: 5}
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
				r = addSample(r, &Result{ID: id, Status: StatusOK, Metrics: map[string]float64{"throughput": v}, Log: r.Log, Values: r.Values, Launch: r.Launch}, k)
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
	for _, want := range []string{"<svg", `id="chart-throughput"`, "kv-pool-no-memory", "RuntimeError: Not enough memory",
		"nccl-tree-cuda-graphs", "python3 -m sglang.launch_server --tp 8", "nccl=fewchan", "distinguishable from noise", "A/B against unpatched.default.cgbs512"} {
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
		msg := "SKIPPED: no chromium (install Debian's chromium, or scripts/services.sh up; set SMPATCH_TEST_CHROMIUM)"
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
	for _, want := range []string{`id="chart-throughput"`, "<svg", "unpatched.fewchan.cgbs512", "kv-pool-no-memory"} {
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
	headless(t, bin, "--screenshot="+shot, "--window-size=900,760", "file://"+page)
	png, err := os.ReadFile(shot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("no screenshot: %v", err)
	}
	if dst := os.Getenv("SMPATCH_SCREENSHOT"); dst != "" {
		os.WriteFile(dst, png, 0o644)
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

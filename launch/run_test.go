package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smpatch/smpatch/internal/junit"
)

// fakeServer is the path of testdata/fakeserver, built once for the tests.
var fakeServer string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "fakeserver")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		// Journal keys of patched trees stay in the test's own directory.
		os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
		fakeServer = filepath.Join(dir, "fakeserver")
		cmd := exec.Command("go", "build", "-o", fakeServer, "../testdata/fakeserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building the fake server: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}())
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

var throughput = Metric{Name: "throughput", Re: regexp.MustCompile(`Output token throughput \(tok/s\):\s+([0-9.]+)`)}

// fakeCell is a cell that runs the fake server in mode; it records the
// server's and its worker's pids in dir.
func fakeCell(t *testing.T, id, mode, dir string, extra ...string) *Cell {
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := []string{fakeServer, "-mode", mode, "-port", strconv.Itoa(port), "-delay", "20ms",
		"-pidfile", filepath.Join(dir, id+".pid"), "-child-pidfile", filepath.Join(dir, id+".child.pid"),
		"--tp", "8"}
	return &Cell{
		ID:      id,
		Values:  []AxisValue{{Axis: "mode", Value: mode}},
		Command: append(cmd, extra...),
		Health:  url + "/health",
		Bench:   []string{fakeServer, "bench", "-url", url},
	}
}

func testOptions(t *testing.T) Options {
	return Options{
		Out:            t.TempDir(),
		Name:           "test",
		Metrics:        []Metric{throughput},
		StartupTimeout: 20 * time.Second, // generous: only the hang test waits it out, with its own 1s
		BenchTimeout:   20 * time.Second,
		StopGrace:      300 * time.Millisecond,
		HealthInterval: 20 * time.Millisecond,
	}
}

// gone reports whether no live process has pid (an orphaned zombie that is
// not reaped yet counts as gone).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] == "Z"
}

// assertNoOrphans checks that every pid file in dir names a process that is gone.
func assertNoOrphans(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) == 0 {
			continue
		}
		pid, _ := strconv.Atoi(string(data))
		if pid > 0 && !gone(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("%s: process %d left running", filepath.Base(f), pid)
		}
	}
}

func TestRunModes(t *testing.T) {
	tests := []struct {
		mode    string
		status  Status
		reason  string // prefix
		label   string // triage label; "" for none
		tail    string // a line the tail must hold, for unknown failures
		healthy bool
		tps     float64
	}{
		{mode: "ok", status: StatusOK, healthy: true, tps: 89.5},
		{mode: "slow", status: StatusOK, healthy: true, tps: 89.5},
		{mode: "ignore-term", status: StatusOK, healthy: true, tps: 89.5},
		// The crash prints its fatal line and exits: either may end the wait first.
		{mode: "crash-arch", status: StatusFailed, label: "flashinfer-no-arch"},
		{mode: "oom", status: StatusFailed, reason: "fatal log line before the server was healthy", label: "cuda-oom"},
		{mode: "hang", status: StatusFailed, reason: "not healthy after 1s", tail: "Loading safetensors checkpoint shards"},
		{mode: "exit0", status: StatusFailed, reason: "server exited with status 0 before it was healthy", tail: "nothing to serve; exiting"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			pids := t.TempDir()
			o := testOptions(t)
			if tt.mode == "hang" {
				o.StartupTimeout = time.Second
			}
			c := fakeCell(t, "cell-"+tt.mode, tt.mode, pids, "-tps", "89.5")
			s, err := Run(context.Background(), []*Cell{c}, o)
			if err != nil {
				t.Fatal(err)
			}
			assertNoOrphans(t, pids)
			r := s.Results[0]
			logText, _ := os.ReadFile(r.Log)
			if r.Status != tt.status || !strings.HasPrefix(r.Reason, tt.reason) {
				t.Fatalf("status %s %q, want %s %q\nlog:\n%s", r.Status, r.Reason, tt.status, tt.reason, logText)
			}
			if (r.HealthySeconds != nil) != tt.healthy {
				t.Errorf("healthy_seconds %v, want set=%v", r.HealthySeconds, tt.healthy)
			}
			if tt.tps != 0 && r.Metrics["throughput"] != tt.tps {
				t.Errorf("metrics %v, want throughput %v", r.Metrics, tt.tps)
			}
			switch {
			case tt.label != "":
				if r.Triage == nil || r.Triage.Label != tt.label || r.Triage.Line < 1 {
					t.Fatalf("triage %+v, want %s", r.Triage, tt.label)
				}
				lines := strings.Split(string(logText), "\n")
				if got := lines[r.Triage.Line-1]; !strings.Contains(got, r.Triage.Text) {
					t.Errorf("triage line %d is %q in the log, result says %q", r.Triage.Line, got, r.Triage.Text)
				}
			case tt.tail != "":
				if r.Triage != nil {
					t.Errorf("triage %+v, want unknown", r.Triage)
				}
				if !strings.Contains(strings.Join(r.Tail, "\n"), tt.tail) {
					t.Errorf("tail %q lacks %q", r.Tail, tt.tail)
				}
			}
			if r.Log != filepath.Join(o.Out, "logs", c.ID+".log") {
				t.Errorf("log path %s", r.Log)
			}
			wantFailed := 0
			if tt.status == StatusFailed {
				wantFailed = 1
			}
			if s.Failed != wantFailed {
				t.Errorf("summary counts %d failed", s.Failed)
			}
		})
	}
}

func TestRunBenchWithoutMetric(t *testing.T) {
	pids := t.TempDir()
	o := testOptions(t)
	o.Metrics = append(o.Metrics, Metric{Name: "ttft", Re: regexp.MustCompile(`TTFT \(ms\): ([0-9.]+)`)})
	s, err := Run(context.Background(), []*Cell{fakeCell(t, "c", "ok", pids)}, o)
	if err != nil {
		t.Fatal(err)
	}
	assertNoOrphans(t, pids)
	r := s.Results[0]
	if r.Status != StatusFailed || r.Reason != "metric ttft not found in the bench output" {
		t.Fatalf("got %s %q", r.Status, r.Reason)
	}
}

func TestRunBenchFails(t *testing.T) {
	pids := t.TempDir()
	o := testOptions(t)
	c := fakeCell(t, "c", "ok", pids)
	c.Bench = []string{fakeServer, "bench", "-url", "http://127.0.0.1:1"}
	s, err := Run(context.Background(), []*Cell{c}, o)
	if err != nil {
		t.Fatal(err)
	}
	assertNoOrphans(t, pids)
	if r := s.Results[0]; r.Status != StatusFailed || r.Reason != "bench: exit status 1" {
		t.Fatalf("got %s %q", r.Status, r.Reason)
	}
}

func TestRunJob(t *testing.T) {
	o := testOptions(t)
	ok := &Cell{ID: "job", Command: []string{"sh", "-c", `echo "Output token throughput (tok/s): 12.5"; echo "Output token throughput (tok/s): 13.25"`}}
	bad := &Cell{ID: "bad", Command: []string{"sh", "-c", `echo "RuntimeError: SM 12.x requires CUDA >= 12.9"; exit 3`}}
	s, err := Run(context.Background(), []*Cell{ok, bad}, o)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Results[0]; r.Status != StatusOK || r.Metrics["throughput"] != 13.25 {
		t.Errorf("job: %s %q %v, want ok with the last throughput line", r.Status, r.Reason, r.Metrics)
	}
	if r := s.Results[1]; r.Status != StatusFailed || r.Triage == nil || r.Triage.Label != "cuda-too-old-for-sm12x" {
		t.Errorf("bad job: %s %q %+v", r.Status, r.Reason, r.Triage)
	}
}

func TestRunStartFails(t *testing.T) {
	o := testOptions(t)
	c := &Cell{ID: "nope", Command: []string{filepath.Join(t.TempDir(), "no-such-server")}, Health: "http://127.0.0.1:1/health"}
	s, err := Run(context.Background(), []*Cell{c}, o)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Results[0]; r.Status != StatusFailed || !strings.HasPrefix(r.Reason, "start: cell nope: fork/exec") {
		t.Fatalf("got %s %q", r.Status, r.Reason)
	}
}

// The story's loop on the fake server: a baseline, a faster cell, a crashing
// one, a pruned one and one left out by --only; then --resume.
func TestRunResultsAndResume(t *testing.T) {
	pids := t.TempDir()
	o := testOptions(t)
	summaryFile := filepath.Join(t.TempDir(), "step-summary.md")
	o.StepSummary = summaryFile
	o.Baseline = "base"
	base := fakeCell(t, "base", "ok", pids, "-tps", "82")
	fast := fakeCell(t, "cgbs128", "ok", pids, "-tps", "89.5")
	crash := fakeCell(t, "fusion", "crash-arch", pids)
	pruned := &Cell{ID: "tree", Values: []AxisValue{{Axis: "nccl_algo", Value: "Tree"}}, Pruned: "NCCL_ALGO=Tree breaks CUDA graph capture"}
	extra := fakeCell(t, "extra", "ok", pids)
	o.Only = []string{"base", "cgbs128", "fusion", "tree"}
	cells := []*Cell{base, fast, crash, pruned, extra}

	s, err := Run(context.Background(), cells, o)
	if err != nil {
		t.Fatal(err)
	}
	assertNoOrphans(t, pids)
	want := []Status{StatusOK, StatusOK, StatusFailed, StatusPruned, StatusSkipped}
	for i, r := range s.Results {
		if r.Status != want[i] {
			t.Errorf("%s: %s %q, want %s", r.ID, r.Status, r.Reason, want[i])
		}
	}
	if d := s.Results[1].DeltaPct["throughput"]; d != 9.1 {
		t.Errorf("delta %v, want +9.1%%", d)
	}
	if s.OK != 2 || s.Failed != 1 || s.Pruned != 1 || s.Skipped != 1 {
		t.Errorf("counts %+v", s)
	}

	for _, f := range []string{ResultsJSONL, ResultsJSON, ResultsCSV, ResultsMD, ResultsJUnit} {
		if _, err := os.Stat(filepath.Join(o.Out, f)); err != nil {
			t.Error(err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(o.Out, ResultsMD))
	for _, w := range []string{
		"| base (baseline) | mode=ok | ok |",
		"| 89.5 | +9.1% |",
		"**flashinfer-no-arch** `",
		"line 8: RuntimeError: No supported CUDA architectures found for major versions [9, 10].`",
		"| tree | nccl_algo=Tree | pruned |",
		"NCCL_ALGO=Tree breaks CUDA graph capture",
	} {
		if !bytes.Contains(md, []byte(w)) {
			t.Errorf("results.md lacks %q:\n%s", w, md)
		}
	}
	if step, _ := os.ReadFile(summaryFile); !bytes.Equal(step, md) {
		t.Errorf("step summary differs from results.md:\n%s", step)
	}
	var ju junit.Suites
	data, _ := os.ReadFile(filepath.Join(o.Out, ResultsJUnit))
	if err := xml.Unmarshal(data, &ju); err != nil {
		t.Fatal(err)
	}
	if got := ju.Suites[0]; got.Tests != 5 || got.Failures != 1 || got.Skipped != 2 || got.Cases[2].Failure == nil || got.Cases[2].Failure.Type != "flashinfer-no-arch" {
		t.Errorf("junit: %+v", got)
	}
	csvData, _ := os.ReadFile(filepath.Join(o.Out, ResultsCSV))
	if !bytes.HasPrefix(csvData, []byte("id,status,reason,healthy_seconds,seconds,triage,triage_line,log,axis:mode,axis:nccl_algo,throughput,throughput_delta_pct\n")) {
		t.Errorf("csv header:\n%s", csvData)
	}
	var js Summary
	data, _ = os.ReadFile(filepath.Join(o.Out, ResultsJSON))
	if err := json.Unmarshal(data, &js); err != nil || len(js.Results) != 5 || js.Results[2].Triage.Line < 1 {
		t.Errorf("results.json: %v %+v", err, js)
	}

	// --resume with every cell selected: only the one not run before runs.
	os.Remove(summaryFile)
	o.Only = nil
	o.Resume = true
	o.StepSummary = ""
	s, err = Run(context.Background(), cells, o)
	if err != nil {
		t.Fatal(err)
	}
	assertNoOrphans(t, pids)
	for i, r := range s.Results {
		resumed := i < 3
		if r.Resumed != resumed {
			t.Errorf("%s: resumed=%v, want %v", r.ID, r.Resumed, resumed)
		}
	}
	if r := s.Results[4]; r.Status != StatusOK {
		t.Errorf("extra: %s %q", r.Status, r.Reason)
	}
	if d := s.Results[4].DeltaPct["throughput"]; d != 0 {
		t.Errorf("extra delta %v, want 0 (same throughput as the baseline)", d)
	}
	lines := bytes.Count(mustRead(t, filepath.Join(o.Out, ResultsJSONL)), []byte("\n"))
	if lines != 4 {
		t.Errorf("results.jsonl has %d lines, want 4 (3 from the first run, 1 appended)", lines)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestRunRefusesBadInput(t *testing.T) {
	o := testOptions(t)
	c := &Cell{ID: "a", Command: []string{"true"}}
	tests := []struct {
		name  string
		cells []*Cell
		mod   func(*Options)
		want  string
	}{
		{"only unknown", []*Cell{c}, func(o *Options) { o.Only = []string{"ab"} }, "--only ab: no such cell (did you mean a?)"},
		{"baseline unknown", []*Cell{c}, func(o *Options) { o.Baseline = "zz" }, "baseline zz: no such cell"},
		{"duplicate", []*Cell{c, c}, nil, `cell id "a" appears twice`},
		{"bad id", []*Cell{{ID: "../x"}}, nil, `cell id "../x" cannot name a log file`},
		{"bad health", []*Cell{{ID: "h", Command: []string{"true"}, Health: "127.0.0.1:30000/health"}}, nil, `cell h: health "127.0.0.1:30000/health" is not an http(s) URL`},
		{"no command", []*Cell{{ID: "n"}}, nil, "cell n: no command to run"},
		{"patches without tree", []*Cell{{ID: "p", Command: []string{"true"}, Patches: []string{"sm120-fusion"}}}, nil, "cell p has patches (sm120-fusion) but there is no tree to apply them to"},
		{"no docker", []*Cell{c}, func(o *Options) { o.Runner = Docker{CLI: "no-such-docker-cli"} }, ErrNoDocker.Error()},
	}
	for _, tt := range tests {
		oo := o
		if tt.mod != nil {
			tt.mod(&oo)
		}
		_, err := Run(context.Background(), tt.cells, oo)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
	if ents, _ := os.ReadDir(o.Out); len(ents) != 0 {
		t.Errorf("refused runs wrote %d entries into the results directory", len(ents))
	}
}

func TestDockerRunArgs(t *testing.T) {
	c := &Cell{ID: "sm120-fusion.fewchan.cgbs128", Image: "reg.example/sglang@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Workdir: "/sgl-workspace",
		Env:     map[string]string{"NCCL_MAX_NCHANNELS": "2", "NCCL_MIN_NCHANNELS": "1"},
		Command: []string{"python3", "-m", "sglang.launch_server", "--tp", "8"}}
	got, err := Docker{ShmSize: "64g"}.RunArgs(c)
	if err != nil {
		t.Fatal(err)
	}
	want := "run --rm --name=smpatch-sm120-fusion.fewchan.cgbs128 --gpus=all --ipc=host --network=host --shm-size=64g " +
		"--env=NCCL_MAX_NCHANNELS=2 --env=NCCL_MIN_NCHANNELS=1 --workdir=/sgl-workspace -- reg.example/sglang@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef python3 -m sglang.launch_server --tp 8"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
	if _, err := (Docker{}).RunArgs(&Cell{ID: "x"}); err == nil || !strings.Contains(err.Error(), "no image") {
		t.Errorf("no image: %v", err)
	}
	// matrix build --out writes refs to an OCI layout: docker cannot run those.
	if _, err := (Docker{}).RunArgs(&Cell{ID: "x", Image: "oci:/tmp/out@sha256:abc"}); err == nil || !strings.Contains(err.Error(), "--push") {
		t.Errorf("OCI layout ref: %v", err)
	}
	if n := (Docker{}).ContainerName(&Cell{ID: "a b/c"}); n != "smpatch-a_b_c" {
		t.Errorf("container name %q", n)
	}
}

func TestCaptureMetrics(t *testing.T) {
	ms := []Metric{throughput, {Name: "latency", Re: regexp.MustCompile(`latency: ([0-9.]+) s`)}, {Name: "whole", Re: regexp.MustCompile(`[0-9]+ tokens`)}}
	tests := []struct {
		out string
		err string
	}{
		{"latency: 2.86 s\nOutput token throughput (tok/s): 89.5\n7 tokens", "metric whole: \"7 tokens\" is not a number"},
		{"Output token throughput (tok/s): 1\nOutput token throughput (tok/s): 2\nlatency: 3 s\n", "metric whole not found in the bench output"},
	}
	for _, tt := range tests {
		_, err := captureMetrics(ms, []byte(tt.out))
		if err == nil || err.Error() != tt.err {
			t.Errorf("%q: err %v, want %q", tt.out, err, tt.err)
		}
	}
	got, err := captureMetrics(ms[:2], []byte("Output token throughput (tok/s): 1\nOutput token throughput (tok/s): 2\nlatency: 3 s\n"))
	if err != nil || got["throughput"] != 2 || got["latency"] != 3 {
		t.Errorf("last match should win: %v %v", got, err)
	}
}

// The docker runner against the fake docker CLI (testdata/fakeserver run
// under the name "docker"): the container gets the cell's environment and the
// GPU, IPC and shared-memory flags, the bench runs through docker exec, and
// docker stop ends a container that ignores SIGTERM.
func TestRunDocker(t *testing.T) {
	bin := t.TempDir()
	docker := filepath.Join(bin, "docker")
	if err := os.Link(fakeServer, docker); err != nil {
		data, rerr := os.ReadFile(fakeServer)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err := os.WriteFile(docker, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	state := t.TempDir()
	t.Setenv("FAKEDOCKER_STATE", state)
	pids := t.TempDir()
	o := testOptions(t)
	o.Runner = Docker{CLI: docker, ShmSize: "1g", Prefix: "test"}
	o.Baseline = "ok"
	mk := func(id, mode string, extra ...string) *Cell {
		c := fakeCell(t, id, mode, pids, extra...)
		c.Image = "reg.example/sglang@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		c.Env = map[string]string{"NCCL_MAX_NCHANNELS": "2"}
		return c
	}
	ok := mk("ok", "story", "--cuda-graph-max-bs", "128")
	crash := mk("crash", "crash-arch")
	stubborn := mk("stubborn", "ignore-term")
	s, err := Run(context.Background(), []*Cell{ok, crash, stubborn}, o)
	if err != nil {
		t.Fatal(err)
	}
	assertNoOrphans(t, pids)
	if r := s.Results[0]; r.Status != StatusOK || r.Metrics["throughput"] != 93.6 || r.Runner != "docker" {
		t.Errorf("ok: %s %q %v (the fewer-channels env should give 93.6)", r.Status, r.Reason, r.Metrics)
	}
	if r := s.Results[1]; r.Status != StatusFailed || r.Triage == nil || r.Triage.Label != "flashinfer-no-arch" {
		t.Errorf("crash: %s %q %+v", r.Status, r.Reason, r.Triage)
	}
	if r := s.Results[2]; r.Status != StatusOK {
		t.Errorf("stubborn: %s %q", r.Status, r.Reason)
	}
	run, err := os.ReadFile(filepath.Join(state, "test-ok.run"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "run --rm --name=test-ok --gpus=all --ipc=host --network=host --shm-size=1g --env=NCCL_MAX_NCHANNELS=2 -- reg.example/sglang@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef " + fakeServer; !strings.HasPrefix(string(run), want) {
		t.Errorf("docker %s\nwant prefix %s", run, want)
	}
}

// A crash can leave results.jsonl with a half-written last line. --resume
// runs that cell again, and the file it leaves must read back whole: the
// next --resume keeps every finished cell instead of stopping at a glued
// line. A results file that does not parse leaves the directory untouched.
func TestResumeAfterTornLine(t *testing.T) {
	o := testOptions(t)
	echo := func(id string) *Cell {
		return &Cell{ID: id, Command: []string{"sh", "-c", "echo 'Output token throughput (tok/s): 7'"}}
	}
	cells := []*Cell{echo("a"), echo("b")}
	if _, err := Run(context.Background(), cells, o); err != nil {
		t.Fatal(err)
	}
	jsonl := filepath.Join(o.Out, ResultsJSONL)
	data, err := os.ReadFile(jsonl)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	torn := append(append([]byte{}, lines[0]...), lines[1][:len(lines[1])/2]...)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"torn", torn},
		{"no final newline", bytes.TrimSuffix(data, []byte("\n"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(jsonl, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			o.Resume = true
			for round := 1; round <= 2; round++ {
				s, err := Run(context.Background(), cells, o)
				if err != nil {
					t.Fatalf("resume %d: %v", round, err)
				}
				if s.OK != 2 {
					t.Errorf("resume %d: %d ok, want 2", round, s.OK)
				}
			}
		})
	}

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, ResultsJSONL), []byte("garbage\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(bad, ResultsMarker), []byte(resultsMarkerText), 0o644)
	o.Out = bad
	if _, err := Run(context.Background(), cells, o); err == nil || !strings.Contains(err.Error(), ResultsJSONL+":1:") {
		t.Fatalf("bad results file: %v", err)
	}
	if ents, _ := os.ReadDir(bad); len(ents) != 2 {
		t.Errorf("a refused --resume left %d entries in the results directory", len(ents))
	}
}

// A server left on the cell's port (an earlier run's) would answer the
// health URL and the benchmark for this cell: the cell fails saying so, and
// its own server is not started.
func TestRunStaleServerOnPort(t *testing.T) {
	stale := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer stale.Close()
	pids := t.TempDir()
	o := testOptions(t)
	c := fakeCell(t, "cell", "ok", pids)
	c.Health = stale.URL + "/health"
	s, err := Run(context.Background(), []*Cell{c}, o)
	if err != nil {
		t.Fatal(err)
	}
	r := s.Results[0]
	if r.Status != StatusFailed || !strings.Contains(r.Reason, "already answers before the cell's server started") || len(r.Metrics) > 0 {
		t.Errorf("got %s %q %v", r.Status, r.Reason, r.Metrics)
	}
	if _, err := os.Stat(filepath.Join(pids, "cell.pid")); err == nil {
		t.Error("the cell's server was started on a taken port")
	}
}

// The text table has no trailing blanks on rows whose last columns are
// empty (an ok cell has no triage).
func TestWriteTextNoTrailingBlanks(t *testing.T) {
	hs := 0.4
	s := &Summary{Name: "t", Metrics: []string{"throughput"}, Results: []*Result{
		{ID: "ok-cell", Status: StatusOK, HealthySeconds: &hs, Metrics: map[string]float64{"throughput": 82}},
		{ID: "failed-cell", Status: StatusFailed, Reason: "exited"},
	}}
	s.count()
	var b bytes.Buffer
	s.WriteText(&b)
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasSuffix(l, " ") {
			t.Errorf("trailing blanks: %q", l)
		}
	}
}

package launch

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

func TestGroupByPatches(t *testing.T) {
	c := func(id string, ps ...string) *Cell { return &Cell{ID: id, Patches: ps} }
	tests := []struct {
		cells []*Cell
		want  string
	}{
		{nil, ""},
		{[]*Cell{c("a"), c("b")}, "a,b"},
		{[]*Cell{c("a"), c("b", "x"), c("c", "x"), c("d")}, "a|b,c|d"},
		{[]*Cell{c("a", "x", "y"), c("b", "y", "x"), c("c", "x", "y")}, "a|b|c"},
	}
	for _, tt := range tests {
		var parts []string
		for _, g := range groupByPatches(tt.cells) {
			var ids []string
			for _, c := range g {
				ids = append(ids, c.ID)
			}
			parts = append(parts, strings.Join(ids, ","))
		}
		if got := strings.Join(parts, "|"); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}

func TestLogSinkSplitsLinesAndReportsFatal(t *testing.T) {
	var buf bytes.Buffer
	s := newLogSink(&buf, DefaultSignatures())
	s.Write([]byte("first\nRuntimeError: No supported CUDA architectures found for major versions [9, 10]."))
	select {
	case <-s.Fatal():
		t.Fatal("fatal before the line was complete")
	default:
	}
	s.Note("between") // completes the partial line first
	select {
	case <-s.Fatal():
	default:
		t.Fatal("no fatal after the partial line was completed")
	}
	s.Write([]byte("more\r\nlast without newline"))
	v := s.Verdict("x.log")
	if v.Lines != 5 || v.Cause == nil || v.Cause.Line != 2 {
		t.Fatalf("lines %d cause %+v", v.Lines, v.Cause)
	}
	if got := strings.Split(buf.String(), "\n"); len(got) != 5 || got[2] != "### smpatch: between" {
		t.Errorf("log:\n%s", buf.String())
	}
	if v.Tail[len(v.Tail)-1] != "last without newline" {
		t.Errorf("tail %q", v.Tail)
	}
}

func TestReadJSONL(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.jsonl")
	os.WriteFile(p, []byte(`{"id":"a","status":"failed"}`+"\n"+`{"id":"a","status":"ok"}`+"\n"+`{"id":"b","sta`), 0o644)
	got, err := readJSONL(nil, p)
	if err != nil || len(got) != 1 || got["a"].Status != StatusOK {
		t.Fatalf("got %v %v, want a=ok and the torn last line ignored", got, err)
	}
	os.WriteFile(p, []byte("{oops\n"+`{"id":"a","status":"ok"}`+"\n"), 0o644)
	if _, err := readJSONL(nil, p); err == nil || !strings.HasPrefix(err.Error(), p+":1: ") {
		t.Errorf("bad line: %v", err)
	}
	if got, err := readJSONL(nil, filepath.Join(dir, "none")); err != nil || len(got) != 0 {
		t.Errorf("missing file: %v %v", got, err)
	}
}

func TestRunConcurrent(t *testing.T) {
	pids := t.TempDir()
	o := testOptions(t)
	o.Concurrency = 3
	var cells []*Cell
	for _, id := range []string{"a", "b", "c", "d"} {
		cells = append(cells, fakeCell(t, id, "ok", pids))
	}
	s, err := Run(context.Background(), cells, o)
	if err != nil {
		t.Fatal(err)
	}
	assertNoOrphans(t, pids)
	for i, r := range s.Results {
		if r.ID != cells[i].ID || r.Status != StatusOK {
			t.Errorf("%d: %s %s %q", i, r.ID, r.Status, r.Reason)
		}
	}
	if n := bytes.Count(mustRead(t, filepath.Join(o.Out, ResultsJSONL)), []byte("\n")); n != 4 {
		t.Errorf("%d lines in results.jsonl", n)
	}
}

// A cell with a rendered run.sh is started through it; the script's log (a
// named pipe under $SMPATCH_LOG_DIR) and its own output both reach the log.
func TestRunThroughRunScript(t *testing.T) {
	o := testOptions(t)
	script := "#!/usr/bin/env bash\nset -euo pipefail\nlog=\"$SMPATCH_LOG_DIR/sh.log\"\necho \"cell sh: log $log\" >&2\n" +
		"echo \"Output token throughput (tok/s): $TPS\" >\"$log\" 2>&1\necho \"cell sh: exit 0\" >&2\n"
	c := &Cell{ID: "sh", Command: []string{"unused"}, Env: map[string]string{"TPS": "41.5"},
		Files: map[string][]byte{"run.sh": []byte(script), "env": []byte("TPS=41.5\n")}}
	s, err := Run(context.Background(), []*Cell{c}, o)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Results[0]; r.Status != StatusOK || r.Metrics["throughput"] != 41.5 {
		t.Fatalf("got %s %q %v\n%s", r.Status, r.Reason, r.Metrics, mustRead(t, r.Log))
	}
	if fi, err := os.Stat(filepath.Join(o.Out, CellsDir, "sh", "run.sh")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("run.sh not written executable: %v", err)
	}
	if log := string(mustRead(t, s.Results[0].Log)); !strings.Contains(log, "cell sh: exit 0") {
		t.Errorf("log lacks the script's own output:\n%s", log)
	}
}

// FuzzReadJSONL: --resume reads what an earlier run (maybe killed mid-write)
// left; it never panics, and what it returns has ids.
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"id":"a","status":"ok","metrics":{"throughput":89.5}}` + "\n" + `{"id":"b","status":"failed","triage":{"label":"x","line":3}}` + "\n"))
	f.Add([]byte(`{"id":"a","status":"ok"}` + "\n" + `{"id":"b","sta`))
	f.Add([]byte("\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), ResultsJSONL)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readJSONL(nil, p)
		if err != nil {
			if !strings.HasPrefix(err.Error(), p+":") {
				t.Fatalf("error does not name the file and line: %v", err)
			}
			return
		}
		for id, r := range got {
			if id == "" || r.ID != id {
				t.Fatalf("result %q under id %q", r.ID, id)
			}
		}
	})
}

func TestGPUPool(t *testing.T) {
	p := newGPUPool([]string{"0", "1", "2"})
	ctx := context.Background()
	a, err := p.acquire(ctx, 2)
	if err != nil || strings.Join(a, ",") != "0,1" {
		t.Fatalf("got %v %v", a, err)
	}
	got := make(chan []string)
	go func() {
		g, _ := p.acquire(ctx, 2) // only "2" is free: waits for a release
		got <- g
	}()
	p.release([]string{"0"})
	if g := <-got; strings.Join(g, ",") != "0,2" {
		t.Errorf("after release got %v, want [0 2]", g)
	}
	if _, err := p.acquire(ctx, 4); err == nil || err.Error() != "needs 4 GPUs, --gpus lists 3" {
		t.Errorf("too many: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.acquire(cctx, 1); err != context.Canceled { // "1" is taken: waits, then gives up
		t.Errorf("cancelled: %v", err)
	}
}

func TestRunLendsGPUs(t *testing.T) {
	o := testOptions(t)
	o.Concurrency = 2
	o.GPUs = []string{"0", "1"}
	job := func(id string, tp int, env map[string]string) *Cell {
		return &Cell{ID: id, TP: tp, Env: env, Command: []string{"sh", "-c",
			`echo "devices=[$CUDA_VISIBLE_DEVICES]"; echo "Output token throughput (tok/s): 1"`}}
	}
	cells := []*Cell{job("a", 1, nil), job("b", 0, nil), job("both", 2, nil), job("three", 3, nil),
		job("own", 2, map[string]string{"CUDA_VISIBLE_DEVICES": "7"})}
	s, err := Run(context.Background(), cells, o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "devices=[0]|devices=[1]", "b": "devices=[0]|devices=[1]", "both": "devices=[0,1]", "own": "devices=[7]"}
	for _, r := range s.Results {
		if r.ID == "three" {
			if r.Status != StatusFailed || r.Reason != "gpus: needs 3 GPUs, --gpus lists 2" {
				t.Errorf("three: %s %q", r.Status, r.Reason)
			}
			continue
		}
		log := string(mustRead(t, r.Log))
		ok := false
		for _, w := range strings.Split(want[r.ID], "|") {
			ok = ok || strings.Contains(log, w+"\n")
		}
		if r.Status != StatusOK || !ok {
			t.Errorf("%s: %s %q, log:\n%s", r.ID, r.Status, r.Reason, log)
		}
	}
	args, _ := Docker{}.RunArgs(&Cell{ID: "d", Image: "i", Command: []string{"x"}, gpus: []string{"1", "2"}})
	if got := strings.Join(args, " "); !strings.Contains(got, ` --gpus="device=1,2" `) {
		t.Errorf("docker: %s", got)
	}
}

// TestMarkdownWarnings: results.md lists each cell's rule warnings under the
// table; a run without warnings has no such section.
func TestMarkdownWarnings(t *testing.T) {
	s := &Summary{Name: "m", Results: []*Result{
		{ID: "a", Status: StatusOK, Warnings: []string{"big-batch: 512 needs more memory (https://example.com/notes)"}},
		{ID: "b", Status: StatusOK},
		{ID: "c", Status: StatusFailed, Warnings: []string{"x: a | b"}},
		{ID: "d", Status: StatusOK, Warnings: []string{"big-batch: 512 needs more memory (https://example.com/notes)"}},
	}}
	var md bytes.Buffer
	s.WriteMarkdown(&md)
	for _, want := range []string{
		"\nWarnings:\n\n",
		// one line per warning, naming every cell it is about
		"\n- `a`, `d`: big-batch: 512 needs more memory (https://example.com/notes)\n",
		"\n- `c`: x: a \\| b\n",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("results.md lacks %q:\n%s", want, &md)
		}
	}
	if strings.Contains(md.String(), "`b`") {
		t.Errorf("a cell without warnings is listed:\n%s", &md)
	}
	md.Reset()
	(&Summary{Results: []*Result{{ID: "b", Status: StatusOK}}}).WriteMarkdown(&md)
	if strings.Contains(md.String(), "Warnings") {
		t.Errorf("warnings section without warnings:\n%s", &md)
	}
}

// Two runs of one matrix into two results directories name their
// containers apart; a run resumed into the same directory names them alike.
func TestRunPrefix(t *testing.T) {
	a, b := RunPrefix("/srv/runs/a"), RunPrefix("/srv/runs/b")
	if a == b || a != RunPrefix("/srv/runs/a") || !regexp.MustCompile(`^smpatch-[0-9a-f]{8}$`).MatchString(a) {
		t.Fatalf("prefixes %q %q", a, b)
	}
	c := &Cell{ID: "unpatched.cgbs128"}
	if got := (Docker{Prefix: a}).ContainerName(c); got != a+"-unpatched.cgbs128" {
		t.Fatalf("container name %q", got)
	}
}

// Metrics come from the end of a cell's log, read within a bound: the
// server's log before the bench output may be gigabytes. A named pipe as
// the log or as results.jsonl is refused, never waited on.
func TestReadTailAndFIFO(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cell.log")
	if err := os.WriteFile(p, []byte(strings.Repeat("server noise\n", 1000)+"throughput: 89.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readTail(p, 100)
	if err != nil || len(got) != 100 || !strings.HasSuffix(string(got), "throughput: 89.5\n") {
		t.Fatalf("readTail = %q, %v", got, err)
	}
	m, err := captureMetrics([]Metric{{Name: "tput", Re: regexp.MustCompile(`throughput: ([0-9.]+)`)}}, got)
	if err != nil || m["tput"] != 89.5 {
		t.Fatalf("metrics %v, %v", m, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	if _, err := readTail(fifo, 100); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("readTail(fifo) = %v", err)
	}
	if _, err := readJSONL(nil, fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("readJSONL(nil, fifo) = %v", err)
	}
}

// results.csv never holds a live spreadsheet formula: matrix values and
// reasons starting with = + - @ (or a tab, a carriage return) get a
// leading quote; numbers, negative ones included, stay numbers.
func TestCSVFormulasNeutralised(t *testing.T) {
	d := -3.5
	s := &Summary{Metrics: []string{"throughput"}, Results: []*Result{{
		ID: "c", Status: StatusFailed, Reason: "=HYPERLINK(\"http://x\",\"y\")", Log: "@SUM(1)",
		Values:   []AxisValue{{Axis: "a", Value: "+cmd|' /C calc'!A0"}, {Axis: "b", Value: "-2+3"}, {Axis: "c", Value: "\t=1"}, {Axis: "d", Value: "-1"}},
		Metrics:  map[string]float64{"throughput": -1.25},
		DeltaPct: map[string]float64{"throughput": d},
	}}}
	var b bytes.Buffer
	if err := s.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	row := map[string]string{}
	for i, h := range rows[0] {
		row[h] = rows[1][i]
	}
	for col, want := range map[string]string{
		"reason": "'=HYPERLINK(\"http://x\",\"y\")", "log": "'@SUM(1)", "axis:a": "'+cmd|' /C calc'!A0", "axis:b": "'-2+3",
		"axis:c": "'\t=1", "axis:d": "-1", "throughput": "-1.25", "throughput_delta_pct": "-3.5",
	} {
		if row[col] != want {
			t.Errorf("%s = %q, want %q", col, row[col], want)
		}
	}
}

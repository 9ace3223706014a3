package launch

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A fatal line drawn after megabytes of a progress bar redrawn with
// carriage returns, on one physical line, is found and numbered.
func TestTriageLongCarriageReturnLine(t *testing.T) {
	var b strings.Builder
	b.WriteString("[2026-03-02 10:00:00 TP0] start\n")
	for b.Len() < 3*maxLineBytes {
		b.WriteString("Loading safetensors checkpoint shards:  42% Completed | 27/64 [00:10<00:14]\r")
	}
	b.WriteString("RuntimeError: No supported CUDA architectures found for major versions [9, 10].\rmore\nafter\n")
	for name, v := range map[string]*Verdict{"file": triageString(t, b.String()), "sink": sinkVerdict(b.String())} {
		if !v.Known || v.Cause.Label != "flashinfer-no-arch" || v.Cause.Line != 2 {
			t.Errorf("%s: cause %+v, want flashinfer-no-arch at line 2", name, v.Cause)
		}
		if v.Lines != 3 {
			t.Errorf("%s: %d lines, want 3", name, v.Lines)
		}
	}
}

func triageString(t *testing.T, log string) *Verdict {
	t.Helper()
	v, err := DefaultSignatures().Triage("x.log", strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func sinkVerdict(log string) *Verdict {
	var out bytes.Buffer
	s := newLogSink(&out, DefaultSignatures())
	for data := []byte(log); len(data) > 0; {
		n := min(len(data), 4096)
		s.Write(data[:n])
		data = data[n:]
	}
	return s.Verdict("x.log")
}

func TestTriageImportErrorAndLastServerLine(t *testing.T) {
	v := triageString(t, "Traceback (most recent call last):\nModuleNotFoundError: No module named 'sglang'\n"+NotePrefix+"server exited: exit status 1\n")
	if !v.Known || v.Cause.Label != "python-module-missing" || v.Cause.Line != 2 {
		t.Fatalf("cause %+v", v.Cause)
	}
	for name, v := range map[string]*Verdict{
		"file": triageString(t, "a\nSegmentation fault (core dumped)\r\n"+NotePrefix+"failed: exited\n"+NotePrefix+"stop\n"),
		"sink": sinkVerdict("a\nSegmentation fault (core dumped)\r\n"),
	} {
		if v.Known || v.LastLine == nil || v.LastLine.Line != 2 || v.LastLine.Text != "Segmentation fault (core dumped)" {
			t.Errorf("%s: last line %+v", name, v.LastLine)
		}
	}
	var buf bytes.Buffer
	triageString(t, "x\nKilled\n"+NotePrefix+"stop\n").WriteText(&buf)
	if !strings.Contains(buf.String(), "last server line 2: Killed") {
		t.Errorf("text:\n%s", buf.String())
	}
}

// One log with every rank: the rank that failed first is the cause, the
// watchdog lines of the others are its consequences even when one was
// written earlier in the file.
func TestTriageRanksInOneLog(t *testing.T) {
	log := strings.Join([]string{
		"[2026-03-02 10:00:00 TP0] Init torch distributed begin.",
		"[rank0]:[E0302 10:10:05.000000 ProcessGroupNCCL.cpp:616] [PG 0 Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
		"[2026-03-02 10:00:05 TP3] Scheduler hit an exception: Traceback (most recent call last):",
		`  File "x.py", line 1, in f`,
		"RuntimeError: CUDA error: an illegal memory access was encountered",
		"[rank5]:[E0302 10:10:06.000000 ProcessGroupNCCL.cpp:616] [PG 0 Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9) ran for 600001 milliseconds before timing out.",
	}, "\n") + "\n"
	v := triageString(t, log)
	if !v.Known || v.Cause.Label != "cuda-illegal-memory-access" || v.Cause.Rank != "3" || v.Cause.Line != 5 || v.Cause.Time != "2026-03-02 10:00:05" {
		t.Fatalf("cause %+v", v.Cause)
	}
	var cons []string
	for _, f := range v.Fatal {
		if f.Consequence {
			cons = append(cons, f.Rank)
		}
	}
	if strings.Join(cons, ",") != "0,5" {
		t.Errorf("consequences on ranks %v, want 0,5: %+v", cons, v.Fatal)
	}
	var buf bytes.Buffer
	v.WriteText(&buf)
	for _, want := range []string{"rank:   3 (the first fatal line in time at 2026-03-02 10:00:05)", "then:  nccl-watchdog-timeout rank 0 at line 2 (a consequence)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, buf.String())
		}
	}
}

// Per-rank logs: the fatal lines are ordered across files by time; a rank
// whose lines carry no rank is named by its file.
func TestMergeRanks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	files := []string{
		write("rank0.log", "[2026-03-02 10:10:05] [PG 0] Watchdog caught collective operation timeout: WorkNCCL ran for 600000 milliseconds\n"),
		write("rank1.log", "[2026-03-02 10:10:05] healthy\n"),
		write("rank2.log", "[2026-03-02 10:00:01] loading\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"),
	}
	var vs []*Verdict
	for _, f := range files {
		v, err := DefaultSignatures().TriageFile(f)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	m := MergeRanks(vs)
	if !m.Known || m.Cause.Label != "cuda-oom" || m.Cause.Rank != "2" || m.Cause.File != files[2] {
		t.Fatalf("cause %+v", m.Cause)
	}
	if len(m.Fatal) != 2 || !m.Fatal[1].Consequence || m.Fatal[1].Rank != "0" {
		t.Errorf("fatal lines %+v", m.Fatal)
	}
	// Only watchdogs: the first is the verdict, nothing is its consequence.
	only := MergeRanks(vs[:2])
	if !only.Known || only.Cause.Label != "nccl-watchdog-timeout" || only.Fatal[0].Consequence {
		t.Errorf("watchdog only: %+v", only.Cause)
	}
}

// The block scan with its prefilter finds what matching every line finds.
func FuzzTriagePrefilter(f *testing.F) {
	for _, name := range []string{"fusion-arch.log", "fewchan-kvpool.log", "healthy.log", "unknown.log"} {
		data, _ := os.ReadFile(filepath.Join("testdata", "logs", name))
		f.Add(data)
	}
	f.Add([]byte("a\rCUDA out of memory\r\n" + NotePrefix + "CUDA out of memory\nNCCL WARN x\nModuleNotFoundError: No module named 'x'"))
	f.Fuzz(func(t *testing.T, log []byte) {
		s := DefaultSignatures()
		fast, err := s.Triage("x", bytes.NewReader(log))
		if err != nil {
			t.Fatal(err)
		}
		slow := s.NewScanner()
		slow.everyLine(log, false)
		sv := slow.Verdict("x")
		if fast.Lines != sv.Lines || fast.Known != sv.Known || len(fast.Notes) != len(sv.Notes) || len(fast.Fatal) != len(sv.Fatal) {
			t.Fatalf("prefiltered %d lines known=%v notes=%d fatal=%d; every line %d known=%v notes=%d fatal=%d",
				fast.Lines, fast.Known, len(fast.Notes), len(fast.Fatal), sv.Lines, sv.Known, len(sv.Notes), len(sv.Fatal))
		}
		if fast.Known && (fast.Cause.Line != sv.Cause.Line || fast.Cause.Label != sv.Cause.Label) {
			t.Fatalf("cause %+v vs %+v", fast.Cause, sv.Cause)
		}
	})
}

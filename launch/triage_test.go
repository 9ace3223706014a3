package launch

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The logs under testdata/logs are synthetic, shaped like sglang server logs
// (timestamps, TP-rank prefixes, Python tracebacks, colour codes).

func TestDefaultSignatures(t *testing.T) {
	s := DefaultSignatures()
	if len(s.All()) < 7 {
		t.Fatalf("only %d built-in signatures", len(s.All()))
	}
	for _, sig := range s.All() {
		if sig.Meaning == "" || sig.Try == "" {
			t.Errorf("%s (%s): meaning and try are required in the built-in file", sig.Label, sig.Source)
		}
	}
}

func TestMatchLine(t *testing.T) {
	s := DefaultSignatures()
	tests := []struct {
		line  string
		label string // "" for no match
		fatal bool
	}{
		{"RuntimeError: No supported CUDA architectures found for major versions [9, 10].", "flashinfer-no-arch", true},
		{"RuntimeError: SM 12.x requires CUDA >= 12.9", "cuda-too-old-for-sm12x", true},
		{"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "kv-pool-no-memory", true},
		{"Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing", "cuda-graph-capture-failed", true},
		{"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "cuda-oom", true},
		{"ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.", "sglang-fusion-gate", true},
		{"RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled system error", "nccl-init-failed", true},
		{"host:123:123 [0] init.cc:1234 NCCL WARN ncclCommInitRank: internal error", "nccl-init-failed", true},
		{"OSError: [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use", "port-in-use", true},
		{"OSError: [Errno 98] Address already in use", "port-in-use", true},
		{"docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", "docker-daemon-unreachable", true},
		{`docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].`, "docker-no-gpu-runtime", true},
		{"gpu0:1:1 [0] NCCL WARN Could not enable P2P between dev 0 and dev 1", "nccl-warning", false},
		{"\x1b[33m[2026-03-02 TP0] Custom allreduce is disabled because this process group spans across nodes.\x1b[0m", "custom-allreduce-off", false},
		{"The server is fired up and ready to roll!", "server-ready", false},
		{"### smpatch: healthy after 0.4s", "server-ready", false},
		{"the server is fired up", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		m := s.MatchLine(7, tt.line)
		if tt.label == "" {
			if m != nil {
				t.Errorf("%q: matched %s, want nothing", tt.line, m.Label)
			}
			continue
		}
		if m == nil {
			t.Errorf("%q: no match, want %s", tt.line, tt.label)
			continue
		}
		if m.Label != tt.label || m.Fatal != tt.fatal || m.Line != 7 {
			t.Errorf("%q: got %s fatal=%v line=%d, want %s fatal=%v line=7", tt.line, m.Label, m.Fatal, m.Line, tt.label, tt.fatal)
		}
		if strings.ContainsRune(m.Text, 0x1b) {
			t.Errorf("%q: colour codes kept in %q", tt.line, m.Text)
		}
	}
}

func TestTriageLogs(t *testing.T) {
	s := DefaultSignatures()
	tests := []struct {
		file     string
		label    string // "" for unknown
		line     int
		notes    int
		tailLast string
	}{
		// The first fatal line wins: the arch line comes before the capture failure.
		{"fusion-arch.log", "flashinfer-no-arch", 10, 1, ""},
		{"fewchan-kvpool.log", "kv-pool-no-memory", 5, 0, ""},
		{"healthy.log", "", 0, 1, `[2026-03-02 12:00:05] INFO:     127.0.0.1:52814 - "GET /health HTTP/1.1" 200 OK`},
		{"unknown.log", "", 0, 0, "Killed"},
	}
	for _, tt := range tests {
		v, err := s.TriageFile(filepath.Join("testdata", "logs", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		if tt.label == "" {
			if v.Known {
				t.Errorf("%s: verdict %s, want unknown", tt.file, v.Cause.Label)
			}
			if len(v.Tail) == 0 || v.Tail[len(v.Tail)-1] != tt.tailLast {
				t.Errorf("%s: tail %q, want it to end with %q", tt.file, v.Tail, tt.tailLast)
			}
			if v.TailStart != 1 {
				t.Errorf("%s: tail starts at %d, want 1", tt.file, v.TailStart)
			}
		} else {
			if !v.Known || v.Cause.Label != tt.label || v.Cause.Line != tt.line {
				t.Errorf("%s: got %+v, want %s at line %d", tt.file, v.Cause, tt.label, tt.line)
			}
		}
		if len(v.Notes) != tt.notes {
			t.Errorf("%s: %d notes, want %d: %+v", tt.file, len(v.Notes), tt.notes, v.Notes)
		}
	}
}

func TestTriageTextOutput(t *testing.T) {
	s := DefaultSignatures()
	v, err := s.Triage("x.log", strings.NewReader("a\nb\nRuntimeError: No supported CUDA architectures found for major versions [9, 10].\n"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	v.WriteText(&buf)
	out := buf.String()
	for _, want := range []string{"x.log: flashinfer-no-arch", "line 3: RuntimeError: No supported", "try:    for SM12x use flashinfer >= 0.6.17"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	v, _ = s.Triage("z.log", strings.NewReader(NotePrefix+"cell c: python3 -m x  # Capture cuda graph failed\n"))
	if v.Known {
		t.Errorf("the runner's own note was triaged: %+v", v.Cause)
	}

	v, _ = s.Triage("y.log", strings.NewReader(strings.Repeat("line\n", 30)+"Segmentation fault\n"))
	buf.Reset()
	v.WriteText(&buf)
	out = buf.String()
	if !strings.Contains(out, "y.log: unknown") || !strings.Contains(out, "    31  Segmentation fault") || strings.Contains(out, "     11  line") {
		t.Errorf("unknown verdict should show the last %d lines with numbers:\n%s", tailLines, out)
	}
	if v.TailStart != 12 || len(v.Tail) != tailLines {
		t.Errorf("tail starts at %d with %d lines, want 12 and %d", v.TailStart, len(v.Tail), tailLines)
	}
}

func TestUserSignaturesComeFirst(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "mine.toml")
	os.WriteFile(f, []byte(`
[[signature]]
label = "my-arch"
pattern = 'No supported CUDA architectures'
meaning = "ours"
try = "ours"
fatal = true
`), 0o644)
	s, err := LoadSignatures([]string{f})
	if err != nil {
		t.Fatal(err)
	}
	m := s.MatchLine(1, "RuntimeError: No supported CUDA architectures found for major versions [9, 10].")
	if m == nil || m.Label != "my-arch" || m.Signature.Source != f+":2" {
		t.Fatalf("got %+v, want my-arch from %s:2", m, f)
	}
}

func TestParseSignaturesErrors(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"empty", "", "x.toml:1: no [[signature]] entries"},
		{"syntax", "[[signature]]\nlabel = \n", "x.toml:2:"},
		{"unknown key", "[[signature]]\nlabel = \"a\"\npattern = \"b\"\nfatl = true\n", `x.toml:4: unknown key "signature.fatl"`},
		{"no label", "[[signature]]\npattern = \"b\"\n", "x.toml:1: signature without a label"},
		{"wrong type", "[[signature]]\nlabel = \"a\"\npattern = 5\n", `x.toml:3: incompatible types: TOML value has type int64; destination has type string (key "signature.pattern")`},
		{"no pattern", "\n[[signature]]\nlabel = \"a\"\n", `x.toml:2: signature "a" without a pattern`},
		{"bad regexp", "[[signature]]\nlabel = \"a\"\npattern = \"(\"\n", `x.toml:3: signature "a": bad pattern`},
		{"matches all", "[[signature]]\nlabel = \"a\"\npattern = \".*\"\n", `x.toml:3: signature "a": pattern matches every line`},
		{"duplicate", "[[signature]]\nlabel = \"a\"\npattern = \"b\"\n[[signature]]\nlabel = \"a\"\npattern = \"c\"\n", `x.toml:4: label "a" already used at line 1`},
	}
	for _, tt := range tests {
		_, err := ParseSignatures("x.toml", []byte(tt.src))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want prefix %q", tt.name, err, tt.want)
		}
	}
}

func TestLoadSignaturesDuplicateAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.toml"), filepath.Join(dir, "b.toml")
	body := []byte("[[signature]]\nlabel = \"x\"\npattern = \"y\"\n")
	os.WriteFile(a, body, 0o644)
	os.WriteFile(b, body, 0o644)
	if _, err := LoadSignatures([]string{a, b}); err == nil || !strings.Contains(err.Error(), `label "x" already defined at `+a+":1") {
		t.Fatalf("got %v", err)
	}
	// A built-in label is taken too: two signatures would answer to it.
	c := filepath.Join(dir, "c.toml")
	os.WriteFile(c, []byte("[[signature]]\nlabel = \"cuda-oom\"\npattern = \"y\"\n"), 0o644)
	if _, err := LoadSignatures([]string{c}); err == nil || !strings.Contains(err.Error(), c+`:1: label "cuda-oom" already defined at `+DefaultSignaturesFile+":") {
		t.Fatalf("built-in label: got %v", err)
	}
	if _, err := LoadSignatures([]string{filepath.Join(dir, "missing.toml")}); err == nil {
		t.Fatal("missing file accepted")
	}
}

// FuzzTriage feeds arbitrary logs and signature files: triage never panics,
// line numbers stay within the log and the tail never exceeds its bound.
func FuzzTriage(f *testing.F) {
	for _, name := range []string{"fusion-arch.log", "fewchan-kvpool.log", "healthy.log", "unknown.log"} {
		data, err := os.ReadFile(filepath.Join("testdata", "logs", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, []byte(""))
	}
	f.Add([]byte("x\x1b[31mCUDA out of memory\x1b[0m\n\n\r\n"), []byte("[[signature]]\nlabel = \"a\"\npattern = \"x+\"\nfatal = true\n"))
	f.Add([]byte("\xff\xfe\x00"), []byte("[[signature]]\nlabel = \"a\"\npattern = \"(?i)ß\"\n"))
	f.Fuzz(func(t *testing.T, log, sigs []byte) {
		s := DefaultSignatures()
		if len(sigs) > 0 {
			user, err := ParseSignatures("fuzz.toml", sigs)
			if err != nil {
				if strings.Contains(err.Error(), "\n") && !strings.HasPrefix(err.Error(), "fuzz.toml") {
					t.Fatalf("error does not name the file: %v", err)
				}
				return
			}
			s = &Signatures{list: append(user.All(), s.All()...)}
		}
		v, err := s.Triage("fuzz.log", bytes.NewReader(log))
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Tail) > tailLines || len(v.Notes) > maxNotes {
			t.Fatalf("tail %d notes %d", len(v.Tail), len(v.Notes))
		}
		if v.Known && (v.Cause.Line < 1 || v.Cause.Line > v.Lines || !v.Cause.Fatal) {
			t.Fatalf("cause %+v outside %d lines", v.Cause, v.Lines)
		}
		for _, n := range v.Notes {
			if n.Fatal || n.Line < 1 || n.Line > v.Lines {
				t.Fatalf("note %+v", n)
			}
		}
		var buf bytes.Buffer
		v.WriteText(&buf)
	})
}

func TestRequiredLiterals(t *testing.T) {
	tests := []struct {
		pattern string
		want    string // joined with |; "-" for nil
	}{
		{`No supported CUDA architectures found`, "No supported CUDA architectures found"},
		{`SM 12\.x requires CUDA >= 12\.9`, "SM 12.x requires CUDA >= 12.9"},
		{`Not enough memory.*mem-fraction-static`, "mem-fraction-static"},
		{`CUDA out of memory|CUDA error: out of memory|OutOfMemoryError`, "out of memory|error: out of memory|OutOfMemoryError"}, // the parser factors out "CUDA "
		{`(ncclCommInitRank|NCCL error).*(internal error|unhandled system error)`, "internal error|unhandled system error"},
		{`[Cc]ustom all-?reduce is disabled`, "reduce is disabled"},
		{`(?i)killed`, "-"},
		{`^Killed$`, "Killed"},
		{`x*`, "-"},
		{`a|b*`, "-"},
		{`(?:abc){2,3}`, "abcabc|abc"},
	}
	for _, tt := range tests {
		got := "-"
		if ls := requiredLiterals(tt.pattern); ls != nil {
			got = strings.Join(ls, "|")
		}
		// Simplify may expand repeats; only check that what we get is sound.
		if tt.want == "abcabc|abc" {
			if got == "-" {
				t.Errorf("%s: no literal", tt.pattern)
			}
			continue
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.pattern, got, tt.want)
		}
	}
}

// The literal prefilter never changes what matches.
func FuzzRequiredLiterals(f *testing.F) {
	for _, s := range DefaultSignatures().All() {
		f.Add(s.Pattern, "RuntimeError: No supported CUDA architectures found for major versions [9, 10].")
	}
	f.Add(`a(b|c)+d`, "xxabcbd")
	f.Fuzz(func(t *testing.T, pattern, line string) {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return
		}
		sig := &Signature{re: re, lits: requiredLiterals(pattern)}
		if got, want := sig.match(line), re.MatchString(line); got != want {
			t.Fatalf("pattern %q line %q: prefiltered %v, regexp %v (literals %q)", pattern, line, got, want, sig.lits)
		}
	})
}

// A healthy log is one line and the server's last line, not a dump of
// its tail; a log that never came up keeps the tail.
func TestTriageTextHealthy(t *testing.T) {
	s := DefaultSignatures()
	v, err := s.TriageFile(filepath.Join("testdata", "logs", "healthy.log"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	v.WriteText(&b)
	out := b.String()
	if !strings.HasPrefix(out, "testdata/logs/healthy.log: no fatal line: the server came up (line 1: ") || strings.Count(out, "\n") != 2 {
		t.Errorf("healthy log:\n%s", out)
	}
	v, err = s.TriageFile(filepath.Join("testdata", "logs", "unknown.log"))
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	v.WriteText(&b)
	if !strings.Contains(b.String(), "unknown: no fatal signature matched") || !strings.Contains(b.String(), "last ") {
		t.Errorf("unknown log:\n%s", b.String())
	}
}

package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A signatures file from elsewhere bounds triage's time by the number and
// size of its patterns: a 3 MB alternation once took minutes over a 650 kB
// log.
func TestSignaturesBounded(t *testing.T) {
	sig := func(label, pattern string) string {
		return fmt.Sprintf("[[signature]]\nlabel = %q\npattern = %q\nmeaning = \"m\"\ntry = \"t\"\nfatal = true\n", label, pattern)
	}
	var alts []string
	for i := 0; len(strings.Join(alts, "|")) <= MaxPatternSize; i++ {
		alts = append(alts, fmt.Sprintf("w%dx", i))
	}
	_, err := ParseSignatures("s.toml", []byte(sig("a", "("+strings.Join(alts, "|")+")")))
	if err == nil || !strings.Contains(err.Error(), "s.toml:3: signature \"a\": pattern of ") {
		t.Errorf("huge pattern: got %v", err)
	}
	var many strings.Builder
	for i := 0; i <= MaxSignatures; i++ {
		many.WriteString(sig(fmt.Sprint("s", i), fmt.Sprint("x", i)))
	}
	_, err = ParseSignatures("s.toml", []byte(many.String()))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d signatures in one file", MaxSignatures)) {
		t.Errorf("too many: got %v", err)
	}
	if _, err := ParseSignatures("s.toml", []byte(sig("ok", "x"))); err != nil {
		t.Error(err)
	}
}

// A line redrawn with carriage returns, each piece starting like a fatal
// signature, is read in time linear in its size (80,000 pieces of one
// 1 MiB line once took 51 s, a scan back over the line per piece), and a
// signal stops the reading of a large log of them at once.
func TestTriageRedrawnLineLinear(t *testing.T) {
	piece := "CUDA out of memory x\r"
	line := strings.Repeat(piece, (1<<20)/len(piece)) + "\n"
	start := time.Now()
	v, err := DefaultSignatures().Triage("x.log", strings.NewReader(line))
	if err != nil || !v.Known || v.Cause.Label == "" || v.Cause.Line != 1 {
		t.Fatalf("%v %+v", err, v)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("one redrawn 1 MiB line took %s", d)
	}
	p := filepath.Join(t.TempDir(), "big.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for range 64 {
		f.WriteString(line)
	}
	f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start = time.Now()
	_, err = DefaultSignatures().TriageFileContext(ctx, p)
	if !errors.Is(err, context.Canceled) && err != nil {
		t.Errorf("a stopped triage: %v", err)
	}
	if d := time.Since(start); d > time.Second+50*time.Millisecond {
		t.Errorf("a stopped triage took %s", d)
	}
}

// A signature's label, meaning and advice are printed one to a line, into
// pipes too: one holding a line break or an escape is refused with its
// line.
func TestSignatureTextRefused(t *testing.T) {
	_, err := ParseSignatures("s.toml", []byte("[[signature]]\nlabel = \"a\"\npattern = \"x\"\nmeaning = \"m\\nlog.txt: ok\"\ntry = \"t\"\n"))
	if err == nil || !strings.HasPrefix(err.Error(), `s.toml:4: signature "a": meaning: "m\nlog.txt: ok" holds a control character`) {
		t.Errorf("err = %v", err)
	}
	_, err = ParseSignatures("s.toml", []byte("[[signature]]\nlabel = \"a\\u001b[2J\"\npattern = \"x\"\n"))
	if err == nil || !strings.HasPrefix(err.Error(), `s.toml:2: signature "a\x1b[2J": label: "a\x1b[2J" holds a control character (\x1b)`) {
		t.Errorf("err = %v", err)
	}
}

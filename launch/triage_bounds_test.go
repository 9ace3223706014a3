package launch

import (
	"fmt"
	"strings"
	"testing"
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

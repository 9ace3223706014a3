package matrix

import (
	"strings"
	"testing"
)

// A matrix file nested 50,000 inline tables deep is refused before the
// TOML parser sees it (parsing it took gigabytes), with one line saying
// where.
func TestParseRefusesDeepNesting(t *testing.T) {
	const d = 50000
	src := "name = \"x\"\n[axes]\nx = [\"a\"]\n[launch]\ncommand = [\"true\"]\nevil = " +
		strings.Repeat("{a = ", d) + "1" + strings.Repeat("}", d) + "\n"
	_, err := Parse("deep.toml", []byte(src))
	if err == nil || err.Error() != "deep.toml:6: nested more than 64 levels deep: not read" {
		t.Fatalf("got %v", err)
	}
}

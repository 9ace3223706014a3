package matrix

import (
	"math"
	"strconv"
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

// Axes whose product passes int64 are refused with the size they really
// make, not the saturated 9223372036854775807.
func TestExpandRefusesProductPastInt64(t *testing.T) {
	var b strings.Builder
	b.WriteString("name = \"big\"\nproject = \"sglang\"\n[base]\nimage = \"x\"\n[launch]\ncommand = [\"x\"]\n[axes]\n")
	vals := make([]string, 10000)
	for i := range vals {
		vals[i] = strconv.Itoa(i)
	}
	for _, a := range []string{"a", "b", "c", "d", "e", "f"} {
		b.WriteString(a + " = [" + strings.Join(vals, ",") + "]\n")
	}
	m, err := Parse("big.toml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Expand(ExpandOptions{})
	if err == nil || !strings.Contains(err.Error(), "the axes make about 1e+24 combinations") {
		t.Fatalf("err = %v", err)
	}
	if CountString(math.MaxInt64) != "more than 9223372036854775806" || CountString(42) != "42" {
		t.Fatalf("CountString: %q %q", CountString(math.MaxInt64), CountString(42))
	}
}

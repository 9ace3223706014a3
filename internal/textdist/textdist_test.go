package textdist

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"NCCL_PROTCOL", "NCCL_PROTO", 2}, {"kitten", "sitting", 3}, {"aply", "apply", 1}, {"sm120-fusion", "sm120-fuson", 1}, {"demo", "dmeo", 2}} {
		if got := Distance(c.a, c.b); got != c.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

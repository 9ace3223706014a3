package words

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 cells"}, {1, "1 cell"}, {2, "2 cells"}, {-1, "-1 cells"}} {
		if got := Count(c.n, "cell", "cells"); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if Plural(1, "entry", "entries") != "entry" || Plural(3, "entry", "entries") != "entries" {
		t.Error("Plural")
	}
}

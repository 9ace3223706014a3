package tomlfile

import (
	"testing"

	"github.com/BurntSushi/toml"
)

func TestLines(t *testing.T) {
	data := []byte("name = \"x\"\n# c\n[requires]\ncuda_min = \"1\"\n\n[[variant]]\nname = \"a\"\n[[variant]]\n\"name\" = \"b\"\nversions = \"\"\"\nname = 1\n\"\"\"\n[unknown.table]\nk = 1\n")
	l := IndexLines(data)
	for _, tt := range []struct {
		table string
		idx   int
		key   string
		want  int
	}{
		{"", -1, "name", 1},
		{"requires", -1, "cuda_min", 4},
		{"requires", -1, "", 3},
		{"variant", 0, "name", 7},
		{"variant", 1, "name", 9},
		{"variant", 1, "", 8},
		{"variant", 1, "versions", 10},
		{"variant", 2, "name", 0},
		{"variant", AnyElement, "versions", 10},
	} {
		if got := l.In(tt.table, tt.idx, tt.key); got != tt.want {
			t.Errorf("In(%q, %d, %q) = %d, want %d", tt.table, tt.idx, tt.key, got, tt.want)
		}
	}
	for _, tt := range []struct {
		key  toml.Key
		want int
	}{
		{toml.Key{"requires", "cuda_min"}, 4},
		{toml.Key{"variant", "versions"}, 10},
		{toml.Key{"unknown", "table"}, 13},
		{toml.Key{"unknown", "table", "k"}, 14},
		{toml.Key{"nowhere"}, 0},
		{nil, 0},
	} {
		if got := l.Of(tt.key); got != tt.want {
			t.Errorf("Of(%v) = %d, want %d", tt.key, got, tt.want)
		}
	}
}

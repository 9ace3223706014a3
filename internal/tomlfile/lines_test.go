package tomlfile

import (
	"bytes"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestIndexLines(t *testing.T) {
	src := `name = "x" # comment
[axes]
a = [
  1, # ]
  2,
]
"quoted.key" = 'v'
s = """
[not.a.table]
b = 1
"""
[[exclude]]
a = 1
[[exclude]]
a = 2
[rule]
[[rule.x]]
y.z = 3
`
	li := IndexLines([]byte(src))
	for _, tt := range []struct {
		key  toml.Key
		want int
	}{
		{toml.Key{"name"}, 1}, {toml.Key{"axes"}, 2}, {toml.Key{"axes", "a"}, 3},
		{toml.Key{"axes", "quoted.key"}, 7}, {toml.Key{"axes", "s"}, 8},
		{toml.Key{"exclude", "0"}, 12}, {toml.Key{"exclude", "0", "a"}, 13},
		{toml.Key{"exclude", "1", "a"}, 15}, {toml.Key{"rule", "x", "0", "y", "z"}, 18},
		// As the decoder names keys: no index; the first element stands.
		{toml.Key{"exclude", "a"}, 13}, {toml.Key{"rule", "x", "y"}, 18},
		// Unknown below a known table: the table's line.
		{toml.Key{"axes", "nope"}, 2}, {toml.Key{"nope"}, 0},
	} {
		if got := li.Line(tt.key); got != tt.want {
			t.Errorf("Line(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
	if got := li.Line(toml.Key{"not", "a", "table"}); got != 0 {
		t.Errorf("a header inside a multi-line string was indexed at line %d", got)
	}
	var none *Lines
	if none.Line(toml.Key{"a"}) != 0 {
		t.Error("nil Lines placed a key")
	}
}

// The line of each undecoded key, as Unknown reports it.
func TestIndexLinesUnknown(t *testing.T) {
	src := "[[signature]]\nlabel = \"a\"\n[[signature]]\nlabel = \"b\"\npatern = \"x\"\n"
	var v struct {
		Signature []struct{ Label string } `toml:"signature"`
	}
	md, err := toml.Decode(src, &v)
	if err != nil {
		t.Fatal(err)
	}
	k, line := Unknown(md, nil, IndexLines([]byte(src)).Line)
	if k.String() != "signature.patern" || line != 5 {
		t.Fatalf("unknown %q at %d", k, line)
	}
}

// Every key a document that decodes defines is placed on one of its lines.
func FuzzIndexLines(f *testing.F) {
	for _, s := range []string{
		"a = 1\n[b]\nc = 2\n", "[[x]]\ny = 1\n[[x]]\ny = 2\n", "a.b.\"c.d\" = 'e'\n",
		"s = '''\n[t]\n'''\nu = 1\n", "a = { b = 1, c = [1, 2] }\n", "[ a . 'b' ]\nc = \"\\\"\"\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		li := IndexLines(data)
		var v map[string]any
		md, err := toml.Decode(string(data), &v)
		if err != nil {
			return
		}
		n := bytes.Count(data, []byte("\n")) + 1
		for _, k := range md.Keys() {
			if l := li.Line(k); l < 1 || l > n {
				t.Fatalf("key %q placed at line %d of %d", k, l, n)
			}
		}
	})
}

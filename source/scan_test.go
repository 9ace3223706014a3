package source

import (
	"fmt"
	"regexp"
	"slices"
	"testing"
)

// The regular expressions the scanners stand for: each scanner must
// accept exactly their language and return the same groups.
var (
	constraintOracle = regexp.MustCompile(`^\s*(===|==|!=|~=|~>|<=|>=|<|>|=)?\s*(.*?)\s*$`)
	literalOracle    = regexp.MustCompile(`(?m)^__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']`)
)

// versionSeeds are versions as upstream writes them, the forms PEP 440
// allows, and text that is no version: constraints without an operator.
var versionSeeds = []string{
	"0.5.3rc2", "0.5.6.post2", "0.0.0.dev9596+g29b7f22d8", "0.6.16.post4", "0.6.17",
	"0.6.18rc7", "v0.5.9", "v0.6.18rc7", "V1.0", "1.0-RC-1", "1.0.alpha.3", "1.0beta",
	"1.0c1", "1.0-5", "1.0.post", "1.0rc1.post2.dev3", "1.0+Ubuntu-1_2", "0!1.2",
	" 2.3.4 ", "1!2.0a1.post3.dev4+local.7", "1.0rc1.post2.dev3+abc.1", "1!0",
	"", "abc", "1.0-foo", "1!2.0", "1..2", "1.0+", "1.0+a..b", "99999999999999999999.0",
	"1.0.dev99999999999999999999", "1.0a-1", "1.0a--1", "1.0-a1", "1.0preview2",
	"1.0prev", "1.0rev3", "1.0r", "1.0-r1", "1.0_post_1", "1.0.dev", "1.0DEV",
	"1.0a.dev1", "1.0-", "1.0.", "1.0+abc-", "1.0+abc.DEF_1", "\t1.0\n", "\v1.0",
	"1.0\u00a0", "\u0661.\u0660", "1.0po\u017ft1", "1.0+\u212aelvin", "1.0+\u017f",
	"1.0+\xe2\x84", "1.0+\xc5", "v", "v1", "vv1", "1.0rc", "1.0alpha", "1.0ALPHA1",
	"0.5.6.post2 ", "1.0\x00", "1.0+a.b-c_d", "1.0b.post.dev",
}

var constraintSeeds = []string{
	">= 0.5.0, < 0.5.7", ">= 0.5.0", " < 0.5.7", "==0.6.17", "~=0.6.16", "===1.0",
	"!= 0.5.6", "~> 1.2", "<=1", ">1", "=1", "0.5.6", "", ">=", ">= 0.5.x", "== 0.5.*",
	"~= 1", "=> 1.0", " \t>=\n0.5.0 \r\n", ">= 1.0\n2.0", "=\n=x", "\v>=1", "== \u00a01",
	"=====1", "<>1", ">= 0.5.0\xff", "\n", "  ", "<", ">= \u0661",
}

var literalSeeds = []string{
	"__version__ = \"0.5.6.post2\"\n",
	"# comment\n__version__ = '0.6.18rc7'\n",
	"__version__: str = \"0.0.0.dev9596+g29b7f22d8\"\n",
	"__version__ = \"0.0.0+unknown\"\n__version__ = \"0.5.9\"\n",
	"try:\n    from ._version import __version__\nexcept ImportError:\n    __version__ = \"0.0.0\"\n",
	"__version__\n=\n'1.0'", "__version__ = \"1.0'", "__version__ = \"\"\n__version__ = \"2\"",
	"__version__ = \"a\nb\"", "x__version__ = \"1\"", "__version__ : str\t= '1'",
	"__version__ :str= '1'__version__ = '2'\n__version__='3'", "__version__ = \"\xff\"",
	"__version__ = \"1", "", "\n\n__version__=\"1\"\n", "__version__ = \"1\"\r\n",
	"__version__ =   \"\u0661\"", "__version__: int = \"1\"",
}

func FuzzScanConstraint(f *testing.F) {
	for _, s := range append(constraintSeeds, versionSeeds...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		op, vs, ok := scanConstraint(s)
		m := constraintOracle.FindStringSubmatch(s)
		if ok != (m != nil) {
			t.Fatalf("scanConstraint(%q): ok %v, expression matches: %v", s, ok, m != nil)
		}
		if ok && (op != m[1] || vs != m[2]) {
			t.Fatalf("scanConstraint(%q) = %q %q, expression: %q %q", s, op, vs, m[1], m[2])
		}
	})
}

func FuzzVersionLiteral(f *testing.F) {
	for _, s := range literalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got [][]int
		for from := 0; ; {
			start, end, vs, ve, ok := versionLiteral(data, from)
			if !ok {
				break
			}
			got = append(got, []int{start, end, vs, ve})
			from = end
		}
		var want [][]int
		for _, m := range literalOracle.FindAllSubmatchIndex(data, -1) {
			want = append(want, m)
		}
		if !slices.EqualFunc(got, want, slices.Equal[[]int]) {
			t.Fatalf("versionLiteral(%q) = %v, expression: %v", data, got, want)
		}
	})
}

// TestScannersAgreeOnSeeds runs the seeds without the fuzzer (go test).
func TestScannersAgreeOnSeeds(t *testing.T) {
	for _, s := range append(constraintSeeds, versionSeeds...) {
		op, vs, ok := scanConstraint(s)
		if m := constraintOracle.FindStringSubmatch(s); ok != (m != nil) || (ok && (op != m[1] || vs != m[2])) {
			t.Errorf("scanConstraint(%q) = %q %q %v, expression %q", s, op, vs, ok, m)
		}
	}
	for _, s := range literalSeeds {
		got, line, ok := RevisionVersionLiteral("version.py", []byte(s))
		want, wantLine, wantOK := oracleLiteral([]byte(s))
		if got != want || line != wantLine || ok != wantOK {
			t.Errorf("RevisionVersionLiteral(%q) = %q %d %v, expression %q %d %v", s, got, line, ok, want, wantLine, wantOK)
		}
	}
}

// oracleLiteral is RevisionVersionLiteral of a .py file as the expression
// reads it.
func oracleLiteral(data []byte) (string, int, bool) {
	for _, m := range literalOracle.FindAllSubmatchIndex(data, -1) {
		s := string(data[m[2]:m[3]])
		if len(s) >= 5 && s[:5] == "0.0.0" {
			continue
		}
		line := 1
		for _, c := range data[:m[0]] {
			if c == '\n' {
				line++
			}
		}
		return s, line, true
	}
	return "", 0, false
}

// A newline inside a comparison's version is refused with one line, as
// the expression did not match it (before, the caller indexed its nil
// result).
func TestParseConstraintsLineBreak(t *testing.T) {
	_, err := ParseConstraints(">= 1.0\n2.0")
	if err == nil || err.Error() != `constraint ">= 1.0\n2.0": a line break inside the version` {
		t.Fatalf("ParseConstraints with a line break: %v", err)
	}
}

func BenchmarkSplitConstraint(b *testing.B) {
	in := []string{">= 0.5.0", " < 0.5.7", "~=0.6.16", "===1.0"}
	b.Run("scanner", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, _, ok := scanConstraint(in[i%len(in)]); !ok {
				b.Fatal(in[i%len(in)])
			}
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if constraintOracle.FindStringSubmatch(in[i%len(in)]) == nil {
				b.Fatal(in[i%len(in)])
			}
		}
	})
}

func BenchmarkVersionLiteral(b *testing.B) {
	data := []byte(fmt.Sprintf("# Copyright\n%s\n__version__ = \"0.5.6.post2\"\n", "import os\n"+
		"from typing import Optional\n"))
	b.Run("scanner", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok := RevisionVersionLiteral("version.py", data); !ok {
				b.Fatal("no literal")
			}
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok := oracleLiteral(data); !ok {
				b.Fatal("no literal")
			}
		}
	})
}

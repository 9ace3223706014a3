package source

import (
	"testing"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in, pep, goText string
	}{
		{"0.5.3rc2", "0.5.3rc2", "0.5.3-rc2"},
		{"0.5.6.post2", "0.5.6.post2", "0.5.6-post2"},
		{"0.0.0.dev9596+g29b7f22d8", "0.0.0.dev9596+g29b7f22d8", "0.0.0-dev9596+g29b7f22d8"},
		{"0.6.16.post4", "0.6.16.post4", "0.6.16-post4"},
		{"0.6.17", "0.6.17", "0.6.17"},
		{"0.6.18rc7", "0.6.18rc7", "0.6.18-rc7"},
		{"v0.5.9", "0.5.9", "0.5.9"},
		{"v0.6.18rc7", "0.6.18rc7", "0.6.18-rc7"},
		{"V1.0", "1.0", "1.0"},
		{"1.0-RC-1", "1.0rc1", "1.0-rc1"},
		{"1.0.alpha.3", "1.0a3", "1.0-a3"},
		{"1.0beta", "1.0b0", "1.0-b0"},
		{"1.0c1", "1.0rc1", "1.0-rc1"},
		{"1.0-5", "1.0.post5", "1.0-post5"},
		{"1.0.post", "1.0.post0", "1.0-post0"},
		{"1.0rc1.post2.dev3", "1.0rc1.post2.dev3", "1.0-rc1.post2.dev3"},
		{"1.0+Ubuntu-1_2", "1.0+ubuntu.1.2", "1.0+ubuntu.1.2"},
		{"0!1.2", "1.2", "1.2"},
		{" 2.3.4 ", "2.3.4", "2.3.4"},
	}
	for _, tt := range tests {
		v, err := ParseVersion(tt.in)
		if err != nil {
			t.Errorf("ParseVersion(%q): %v", tt.in, err)
			continue
		}
		if got := VersionString(v); got != tt.pep {
			t.Errorf("VersionString(ParseVersion(%q)) = %q, want %q", tt.in, got, tt.pep)
		}
		if got := v.Original(); got != tt.goText {
			t.Errorf("ParseVersion(%q).Original() = %q, want %q", tt.in, got, tt.goText)
		}
		// The go-version text parses back to the same version.
		again, err := ParseVersion(v.Original())
		if err != nil || ComparePEP440(v, again) != 0 {
			t.Errorf("round trip of %q via %q failed: %v", tt.in, v.Original(), err)
		}
	}
}

func TestParseVersionErrors(t *testing.T) {
	for _, in := range []string{"", "abc", "1.0-foo", "1!2.0", "1..2", "1.0+", "1.0+a..b", "99999999999999999999.0", "1.0.dev99999999999999999999"} {
		if v, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q) = %v, want error", in, v)
		}
	}
}

func TestComparePEP440Order(t *testing.T) {
	// Strictly increasing.
	order := []string{
		"0.0.0.dev9596+g29b7f22d8",
		"0.5.0.dev1",
		"0.5.0a1",
		"0.5.0a2.dev1",
		"0.5.0a2",
		"0.5.0b1",
		"0.5.0rc1",
		"0.5.0rc1.post1",
		"0.5.0",
		"0.5.0+g1234",
		"0.5.0.post1.dev2",
		"0.5.0.post1",
		"0.5.3rc2",
		"0.5.3",
		"0.5.6",
		"0.5.6.post1",
		"0.5.6.post2",
		"0.5.7",
		"0.6.16",
		"0.6.16.post4",
		"0.6.17",
		"0.6.18rc7",
		"0.6.18",
		"0.10.0",
		"1",
	}
	vs := make([]*pep440, len(order))
	for i, s := range order {
		p, err := parsePEP440(s)
		if err != nil {
			t.Fatal(err)
		}
		vs[i] = p
	}
	for i := range vs {
		for j := range vs {
			want := cmpInt(int64(i), int64(j))
			if got := vs[i].compare(vs[j]); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func TestComparePEP440Equal(t *testing.T) {
	for _, pair := range [][2]string{{"0.5", "0.5.0"}, {"v0.5.0", "0.5.0.0"}, {"1.0RC1", "1.0rc1"}, {"1.0-1", "1.0.post1"}} {
		a, _ := ParseVersion(pair[0])
		b, _ := ParseVersion(pair[1])
		if ComparePEP440(a, b) != 0 {
			t.Errorf("%s and %s should be equal", pair[0], pair[1])
		}
	}
}

func TestSatisfies(t *testing.T) {
	tests := []struct {
		cons, v string
		want    bool
	}{
		{">= 0.5.0, < 0.5.7", "0.5.3rc2", true},
		{">= 0.5.0, < 0.5.7", "0.5.6.post2", true},
		{">= 0.5.0, < 0.5.7", "0.5.7", false},
		{">= 0.5.0, < 0.5.7", "0.4.9", false},
		{">= 0.5.0, < 0.5.7", "0.5.0rc1", false},
		{">= 0.5.0, < 0.5.7", "0.0.0.dev9596+g29b7f22d8", false},
		{">= 0.5.7", "0.5.7", true},
		{">= 0.5.7", "0.5.9", true},
		{"< 0.6.17", "0.6.16.post4", true},
		{">= 0.6.17", "0.6.16.post4", false},
		{">= 0.6.17", "0.6.17", true},
		{">= 0.6.17", "0.6.18rc7", true},
		{"> 0.6.16", "0.6.16.post4", false},
		{"> 0.5.6", "0.5.6.post2", false},
		{"> 0.5.6", "0.5.6.0.post2", false},
		{"> 0.5.6", "0.5.6.post2.dev1", false},
		{"> 0.5.6", "0.5.7", true},
		{"> 0.5.6", "0.5.7.post1", true},
		{"> 0.5.6.post1", "0.5.6.post2", true},
		{"> 0.5.6", "0.5.6+g1", false},
		{"< 0.5.7", "0.5.7rc1", false},
		{"< 0.5.7", "0.5.7.dev3", false},
		{"< 0.5.7", "0.5.7.0a1", false},
		{"< 0.5.7", "0.5.6rc1", true},
		{"< 0.5.7", "0.5.6.post1", true},
		{"< 0.5.7rc2", "0.5.7rc1", true},
		{"< 0.5.7rc2", "0.5.7.dev1", true},
		{"<= 0.5.6", "0.5.6+g29b7f22d8", true},
		{"<= 0.5.6", "0.5.6.post2", false},
		{"== 0.5.6.post2", "0.5.6.post2", true},
		{"==0.5.6", "0.5.6.0", true},
		{"0.5.6", "0.5.6", true},
		{"!= 0.5.6", "0.5.6", false},
		{"!= 0.5.6", "0.5.7", true},
		{"~= 0.6.16", "0.6.18rc7", true},
		{"~= 0.6.16", "0.7.0", false},
		{"~= 0.6", "0.9.1", true},
		{"~= 0.6", "1.0", false},
		{"== 0.5.6+g1", "0.5.6+g2", false},
	}
	for _, tt := range tests {
		cs, err := ParseConstraints(tt.cons)
		if err != nil {
			t.Errorf("ParseConstraints(%q): %v", tt.cons, err)
			continue
		}
		v, err := ParseVersion(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := Satisfies(cs, v); got != tt.want {
			t.Errorf("Satisfies(%q, %s) = %v, want %v", tt.cons, tt.v, got, tt.want)
		}
		if got, err := SatisfiesText(tt.cons, v); err != nil || got != tt.want {
			t.Errorf("SatisfiesText(%q, %s) = %v, %v, want %v", tt.cons, tt.v, got, err, tt.want)
		}
	}
	if Satisfies(nil, nil) {
		t.Error("a nil version satisfies nothing")
	}
}

func TestParseConstraintsErrors(t *testing.T) {
	for _, in := range []string{"", ">=", ">= 0.5.x", "== 0.5.*", "~= 1", ">= 0.5.0,", "=> 1.0"} {
		if cs, err := ParseConstraints(in); err == nil {
			t.Errorf("ParseConstraints(%q) = %v, want error", in, cs)
		}
	}
}

// FuzzSatisfiesText checks SatisfiesText against ParseConstraints and
// Satisfies: the same answer, and an error exactly where they fail.
func FuzzSatisfiesText(f *testing.F) {
	for _, c := range []string{">= 0.5.0, < 0.5.7", "~= 0.6.16", "== 0.5.6+g1", "> 0.5.6.post1", "!= 0.5.6", "0.5.6", "", ">=", "== 0.5.*", "~= 1", ">= 0.5.0,"} {
		for _, v := range []string{"0.5.3rc2", "0.5.6.post2", "0.0.0.dev9596+g29b7f22d8", "0.6.18rc7", "0.5.6+g2", "1.0"} {
			f.Add(c, v)
		}
	}
	f.Fuzz(func(t *testing.T, c, vs string) {
		v, err := ParseVersion(vs)
		if err != nil {
			return
		}
		got, err := SatisfiesText(c, v)
		cs, perr := ParseConstraints(c)
		if (err != nil) != (perr != nil) {
			t.Fatalf("SatisfiesText(%q, %q): error %v, ParseConstraints: %v", c, vs, err, perr)
		}
		if err != nil {
			if err.Error() != perr.Error() {
				t.Fatalf("SatisfiesText(%q): %v, ParseConstraints: %v", c, err, perr)
			}
			return
		}
		if want := Satisfies(cs, v); got != want {
			t.Fatalf("SatisfiesText(%q, %q) = %v, Satisfies: %v", c, vs, got, want)
		}
	})
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range append([]string{"0.5.3rc2", "0.5.6.post2", "0.0.0.dev9596+g29b7f22d8", "v0.6.18rc7", "1.0-5", "1!0", "1.0rc1.post2.dev3+abc.1"}, versionSeeds...) {
		f.Add(s, "0.6.17")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		va, err := ParseVersion(a)
		if err != nil {
			return
		}
		// The go-version text and the canonical text read back equal.
		again, err := ParseVersion(VersionString(va))
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", VersionString(va), a, err)
		}
		if ComparePEP440(va, again) != 0 {
			t.Fatalf("%q and its canonical form %q differ", a, VersionString(va))
		}
		vb, err := ParseVersion(b)
		if err != nil {
			return
		}
		if ComparePEP440(va, vb) != -ComparePEP440(vb, va) {
			t.Fatalf("compare of %q and %q is not antisymmetric", a, b)
		}
		cs, err := ParseConstraints(">= " + VersionString(vb))
		if err != nil {
			t.Fatalf("constraint on %q: %v", VersionString(vb), err)
		}
		if Satisfies(cs, va) != (ComparePEP440(va, vb) >= 0) {
			t.Fatalf("Satisfies(>= %s, %s) disagrees with compare", b, a)
		}
	})
}

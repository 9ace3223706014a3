package smver

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string][2]int{
		"12.0": {12, 0}, "12.1": {12, 1}, " 9.0 ": {9, 0}, "12": {12, 0}, "120": {12, 0}, "sm_120": {12, 0},
		"sm120a": {12, 0}, "sm_121a": {12, 1}, "sm_100f": {10, 0}, "SM_90a": {9, 0}, "8.6": {8, 6}, "86": {8, 6},
		"compute_90": {9, 0}, "compute_120f": {12, 0}, "9.0+PTX": {9, 0}, "sm_12": {1, 2},
	} {
		ma, mi, err := Parse(in)
		if err != nil || ma != want[0] || mi != want[1] {
			t.Errorf("Parse(%q) = %d, %d, %v", in, ma, mi, err)
		}
	}
	for _, bad := range []string{"", "x", "0", "0.5", "12.10", "1000", "-1.0", "12.", ".0", "sm_", "sm_9", "sm_1000",
		"120af", "sm_12.0", "compute_", "9.0a+PTX", "sm_120+ptx", "12.0b", "\"12.1\"", "1 2"} {
		if _, _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) passed", bad)
		}
	}
}

func TestParseArch(t *testing.T) {
	for in, want := range map[string]Arch{
		"sm_120a":     {Major: 12, Minor: 0, Suffix: "a"},
		"sm_121a":     {Major: 12, Minor: 1, Suffix: "a"},
		"sm_100f":     {Major: 10, Minor: 0, Suffix: "f"},
		"12.0f":       {Major: 12, Minor: 0, Suffix: "f"},
		"compute_90":  {Major: 9, Minor: 0, PTX: true},
		"compute_90a": {Major: 9, Minor: 0, Suffix: "a", PTX: true},
		"9.0+ptx":     {Major: 9, Minor: 0, PTX: true},
		"12.1":        {Major: 12, Minor: 1},
	} {
		got, err := ParseArch(in)
		if err != nil || got != want {
			t.Errorf("ParseArch(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	a, _ := ParseArch("sm121a")
	if a.Target() != "sm_121a" || a.String() != "12.1a" {
		t.Errorf("sm121a: target %s, string %s", a.Target(), a.String())
	}
	p, _ := ParseArch("9.0+PTX")
	if p.Target() != "compute_90" {
		t.Errorf("9.0+PTX: target %s", p.Target())
	}
}

func TestCompare(t *testing.T) {
	order := []string{"sm_86", "sm_90", "compute_90", "sm_90a", "sm_100", "sm_100f", "12.0", "sm_120a", "12.1", "sm_121a"}
	for i := range order {
		for j := range order {
			a, _ := ParseArch(order[i])
			b, _ := ParseArch(order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := Compare(a, b); got != want {
				t.Errorf("Compare(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"sm_120a", "12.1", "compute_90", "9.0+PTX", "120", "12"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseArch(s)
		if err != nil {
			return
		}
		if a.Major <= 0 || a.Major >= 100 || a.Minor < 0 || a.Minor >= 10 || (a.Suffix != "" && a.Suffix != "a" && a.Suffix != "f") {
			t.Fatalf("ParseArch(%q) = %+v", s, a)
		}
		// What it names reads back the same, as a target and as a capability.
		if b, err := ParseArch(a.Target()); err != nil || b != a {
			t.Fatalf("ParseArch(%q) = %+v; its target %s reads %+v, %v", s, a, a.Target(), b, err)
		}
		if !a.PTX {
			if b, err := ParseArch(a.String()); err != nil || b != a {
				t.Fatalf("ParseArch(%q) = %+v; %s reads %+v, %v", s, a, a.String(), b, err)
			}
		}
	})
}

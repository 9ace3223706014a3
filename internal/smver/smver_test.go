package smver

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string][2]int{
		"12.0": {12, 0}, " 9.0 ": {9, 0}, "12": {12, 0}, "120": {12, 0}, "sm_120": {12, 0},
		"sm120a": {12, 0}, "sm_100f": {10, 0}, "SM_90a": {9, 0}, "8.6": {8, 6}, "86": {8, 6},
	} {
		ma, mi, err := Parse(in)
		if err != nil || ma != want[0] || mi != want[1] {
			t.Errorf("Parse(%q) = %d, %d, %v", in, ma, mi, err)
		}
	}
	for _, bad := range []string{"", "x", "0", "12.10", "1000", "-1.0", "12.", ".0", "sm_"} {
		if _, _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) passed", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("sm_120a")
	f.Fuzz(func(t *testing.T, s string) {
		ma, mi, err := Parse(s)
		if err == nil && (ma <= 0 || ma >= 100 || mi < 0 || mi >= 10) {
			t.Fatalf("Parse(%q) = %d, %d", s, ma, mi)
		}
	})
}

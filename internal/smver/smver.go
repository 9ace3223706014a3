package smver

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Arch is a compute capability, with what a compilation target adds to it.
type Arch struct {
	Major, Minor int
	// Suffix is "a" for an arch-specific target (sm_90a, sm_120a: that
	// exact GPU only), "f" for a family target (sm_100f: the 10.x
	// family), "" for neither.
	Suffix string
	// PTX is set for a virtual architecture (compute_90, or "9.0+PTX" in
	// an arch list): code that the driver compiles for the GPU it runs on.
	PTX bool
}

// Parse reads a compute capability into its major and minor numbers: what
// ParseArch reads, without the suffix and the kind.
func Parse(s string) (major, minor int, err error) {
	a, err := ParseArch(s)
	return a.Major, a.Minor, err
}

// ParseArch reads a compute capability or a compilation target:
//
//	"12.0", "12.1", "9.0a", "10.0f", "9.0+PTX"    MAJOR.MINOR, minor 0 to 9
//	"12", "9"                                     a major alone (below 20)
//	"120", "86"                                   MAJOR and MINOR run together
//	"sm_120", "sm120a", "sm_100f", "compute_90a"  a target: MAJOR and MINOR run together
//
// Case and surrounding space do not matter. A target's digits are always
// MAJOR then one digit of MINOR (sm_12 is 1.2); a major is 1 to 99.
func ParseArch(s string) (Arch, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	var a Arch
	prefixed := false
	for _, p := range []string{"sm_", "sm", "compute_"} {
		if rest, ok := strings.CutPrefix(t, p); ok {
			t, prefixed, a.PTX = rest, true, p == "compute_"
			break
		}
	}
	if !prefixed {
		if rest, ok := strings.CutSuffix(t, "+ptx"); ok {
			t, a.PTX = rest, true
		}
	}
	if n := len(t); n > 0 && (t[n-1] == 'a' || t[n-1] == 'f') {
		a.Suffix, t = t[n-1:], t[:n-1]
	}
	ok := false
	if maj, mnr, dotted := strings.Cut(t, "."); dotted {
		ok = !prefixed && digits(maj, 1, 2) && digits(mnr, 1, 1)
		a.Major, _ = strconv.Atoi(maj)
		a.Minor, _ = strconv.Atoi(mnr)
	} else if digits(t, 1, 3) {
		n, _ := strconv.Atoi(t)
		switch {
		case prefixed || n >= 20:
			ok = len(t) >= 2
			a.Major, a.Minor = n/10, n%10
		default:
			ok = true
			a.Major = n
		}
	}
	if !ok || a.Major < 1 || a.PTX && !prefixed && a.Suffix != "" {
		return Arch{}, fmt.Errorf("%q is not a GPU compute capability (like 12.0 or sm_120)", s)
	}
	return a, nil
}

// digits reports whether s is between lo and hi ASCII digits.
func digits(s string, lo, hi int) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String is the capability as nvidia-smi prints it, with the suffix:
// "12.0", "12.0a".
func (a Arch) String() string {
	return strconv.Itoa(a.Major) + "." + strconv.Itoa(a.Minor) + a.Suffix
}

// Target is the compilation target nvcc and cuobjdump name: "sm_120a",
// "compute_90".
func (a Arch) Target() string {
	p := "sm_"
	if a.PTX {
		p = "compute_"
	}
	return p + strconv.Itoa(a.Major*10+a.Minor) + a.Suffix
}

// Compare orders capabilities by major, then minor; a target without a
// suffix before its "a", before its "f"; of the same suffix, a cubin
// before PTX.
func Compare(a, b Arch) int {
	if c := cmp.Compare(a.Major, b.Major); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Minor, b.Minor); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Suffix, b.Suffix); c != 0 {
		return c
	}
	switch {
	case a.PTX == b.PTX:
		return 0
	case b.PTX:
		return -1
	}
	return 1
}

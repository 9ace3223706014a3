package patches

import (
	"testing"

	"github.com/smpatch/smpatch/internal/lazyre"
)

// The expressions validPatchName and validModuleName replace; the journal's
// fuzz target checks accepted entries against patchNameRE too.
var (
	patchNameRE  = lazyre.New(`^[a-z0-9][a-z0-9._-]*$`)
	moduleNameRE = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

var nameSeeds = []string{
	"sm120-fusion", "sm120-fusion-auto", "a", "0", "a.b_c-d", "", "-a", ".a", "_a", "A",
	"aB", "a b", "a\n", "\na", "a/b", "a\u00e9", "\u212a", "\u0661", "a\x00", "sm120_fusion",
	"flashinfer", "_private", "Module9", "9module", "flash-infer", "mod\u017fule", "trtllm_comm",
}

func FuzzValidPatchName(f *testing.F) {
	for _, s := range nameSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validPatchName(s), patchNameRE().MatchString(s); got != want {
			t.Fatalf("validPatchName(%q) = %v, expression %v", s, got, want)
		}
	})
}

func FuzzValidModuleName(f *testing.F) {
	for _, s := range nameSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validModuleName(s), moduleNameRE().MatchString(s); got != want {
			t.Fatalf("validModuleName(%q) = %v, expression %v", s, got, want)
		}
	})
}

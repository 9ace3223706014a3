package catalog

import "testing"

func TestNames(t *testing.T) {
	for s, want := range map[string]bool{
		"sm120-fusion": true, "a.b_c-d": true, "0": true, "": false, "-a": false, ".a": false,
		"A": false, "a b": false, "a\n": false, "a/b": false, "a\u00e9": false, "\u212a": false,
	} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v", s, got)
		}
	}
	for s, want := range map[string]bool{
		"trtllm_comm": true, "_private": true, "Module9": true, "9module": false, "flash-infer": false, "mod\u017fule": false, "": false,
	} {
		if got := validModuleName(s); got != want {
			t.Errorf("validModuleName(%q) = %v", s, got)
		}
	}
}

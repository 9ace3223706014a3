package upstream

import (
	"strings"
	"testing"

	"github.com/smpatch/smpatch/source"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Target
		err  string
	}{
		{in: "sglang@main", want: Target{source.SGLang, "https://github.com/sgl-project/sglang", "main"}},
		{in: "flashinfer@v0.6.0", want: Target{source.FlashInfer, "https://github.com/flashinfer-ai/flashinfer", "v0.6.0"}},
		{in: "flashinfer=file:///srv/fi.git@v0.6.18rc7", want: Target{source.FlashInfer, "file:///srv/fi.git", "v0.6.18rc7"}},
		{in: "sglang=git@github.com:me/sglang.git@abc1234", want: Target{source.SGLang, "git@github.com:me/sglang.git", "abc1234"}},
		{in: "sglang", err: "want PROJECT[=URL]@REF"},
		{in: "sglang@", err: "empty revision"},
		{in: "vllm@main", err: `unknown project "vllm"`},
		{in: "sglang=@main", err: "empty URL"},
		{in: "@main", err: "unknown project"},
	} {
		got, err := ParseTarget(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseTarget(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"sglang@main", "flashinfer=file:///x@v1", "a=b@c@d", "@", "="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		if tg.Ref == "" || tg.URL == "" || strings.Contains(tg.Ref, "@") {
			t.Fatalf("ParseTarget(%q) = %+v", s, tg)
		}
	})
}

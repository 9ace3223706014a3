package upstream

import (
	"context"
	"testing"

	"github.com/smpatch/smpatch/source"
)

func TestCheckTreeStatuses(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	for _, tc := range []struct {
		commit string
		strict bool
		want   Status
		line   int
	}{
		{"v0.6.0", false, Applies, 0},
		{"drift", false, Applies, 0},
		{"fuzzy", false, Fuzzy, 23},
		{"fuzzy", true, Fuzzy, 23},
		{"conflict", false, Conflict, 0},
		{"adopt", false, AlreadyUpstream, 0},
		{"post", false, AlreadyUpstream, 0},
	} {
		tr, err := source.NewRevisionTree(fx.b.Repo, fx.commits[tc.commit], source.FlashInfer, fx.b.URL())
		if err != nil {
			t.Fatal(err)
		}
		rs := CheckTree(ctx, tr, fx.patches, Options{Strict: tc.strict})
		if len(rs) != 1 {
			t.Fatalf("%d results", len(rs))
		}
		r := rs[0]
		if r.Status != tc.want {
			t.Errorf("%s (strict %v): %s (%s), want %s", tc.commit, tc.strict, r.Status, r.Detail, tc.want)
			continue
		}
		if r.Patch != "trtllm-comm-sm12" || r.Project != source.FlashInfer || r.Revision != fx.b.URL()+"@"+fx.commits[tc.commit].String() {
			t.Errorf("%s: result %+v", tc.commit, r)
		}
		if tc.want == Conflict || tc.want == Fuzzy {
			if r.Target != "flashinfer/jit/comm.py" || r.SourceLine != 4 || r.Line == 0 {
				t.Errorf("%s: target %s:%d source %s:%d", tc.commit, r.Target, r.Line, r.Source, r.SourceLine)
			}
		}
		if tc.commit == "drift" && r.Hunks["offset"] != 1 {
			t.Errorf("drift: hunks %v, want one at an offset", r.Hunks)
		}
		if tc.commit == "v0.6.0" && (r.Version != "0.6.0" || r.VersionFrom != "version.txt:1") {
			t.Errorf("v0.6.0: version %q from %q", r.Version, r.VersionFrom)
		}
	}
}

func TestStatusFailed(t *testing.T) {
	for _, tc := range []struct {
		s              Status
		normal, strict bool
	}{
		{Applies, false, false},
		{Fuzzy, false, true},
		{AlreadyUpstream, false, false},
		{Conflict, true, true},
		{NoVariant, true, true},
		{Error, true, true},
	} {
		if tc.s.Failed(false) != tc.normal || tc.s.Failed(true) != tc.strict {
			t.Errorf("%s: Failed = %v/%v, want %v/%v", tc.s, tc.s.Failed(false), tc.s.Failed(true), tc.normal, tc.strict)
		}
	}
}

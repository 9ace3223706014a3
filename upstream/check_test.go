package upstream

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
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
		tr, err := gitrepo.OpenRevision(fx.b.Repo, fx.commits[tc.commit], source.FlashInfer, fx.b.URL())
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

// A patch whose only variant is for other versions and does not resolve is
// no-variant; every patch is still attempted and reported in order.
func TestCheckTreeNoVariant(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "old-gate"), 0o755); err != nil {
		t.Fatal(err)
	}
	toml := "name = \"old-gate\"\nproject = \"flashinfer\"\nsummary = \"x\"\n\n[[variant]]\nversions = \"< 0.5\"\ndiffs = [\"old-gate/a.diff\"]\n"
	diff := "diff --git a/flashinfer/comm/trtllm_ar.py b/flashinfer/comm/trtllm_ar.py\n--- a/flashinfer/comm/trtllm_ar.py\n+++ b/flashinfer/comm/trtllm_ar.py\n@@ -1,1 +1,1 @@\n-gate = [9, 10]\n+gate = [9, 10, 12]\n"
	if err := os.WriteFile(filepath.Join(dir, "old-gate.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old-gate", "a.diff"), []byte(diff), 0o644); err != nil {
		t.Fatal(err)
	}
	extra, err := catalog.LoadFS(os.DirFS(dir), dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := gitrepo.OpenRevision(fx.b.Repo, fx.commits["v0.6.0"], source.FlashInfer, fx.b.URL())
	if err != nil {
		t.Fatal(err)
	}
	rs := CheckTree(ctx, tr, append(extra, fx.patches...), Options{})
	if len(rs) != 2 || rs[0].Patch != "old-gate" || rs[0].Status != NoVariant || rs[1].Status != Applies {
		t.Fatalf("results %+v", rs)
	}
	if !strings.Contains(rs[0].Detail, "0.6.0") {
		t.Errorf("no-variant detail %q does not name the version", rs[0].Detail)
	}
	rp := &Report{Results: rs}
	if rp.Failed() != 1 {
		t.Errorf("Failed = %d", rp.Failed())
	}
}

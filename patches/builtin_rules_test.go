package patches_test

import (
	"strings"
	"testing"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/patches/udiff"
	"github.com/smpatch/smpatch/source"
)

// The built-in catalog cannot under-patch: every change a variant makes
// has a verify rule, a variant whose result leaves one unmet is not taken
// (another is, by content), and a tree that already carries part of a
// patch gets the rest.

func builtinCatalog(t *testing.T) *patches.Catalog {
	t.Helper()
	cat, err := catalog.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// hunkSides is a hunk's old and new side as text.
func hunkSides(h *udiff.Hunk) (o, n []byte) {
	var ob, nb strings.Builder
	for i, op := range h.Ops {
		if op != '+' {
			ob.WriteString(h.Lines[i] + "\n")
		}
		if op != '-' {
			nb.WriteString(h.Lines[i] + "\n")
		}
	}
	return []byte(ob.String()), []byte(nb.String())
}

// Every hunk of every variant of every built-in patch is proved by a rule
// on its file: the rule's positive check holds on the hunk's new side and
// not on its old side.
func TestBuiltinRulesCoverEveryHunk(t *testing.T) {
	for _, p := range builtinCatalog(t).All() {
		for _, v := range p.Variants {
			for _, fd := range v.Files {
				for i, h := range fd.Hunks {
					o, n := hunkSides(h)
					proved := false
					for j := range p.Verify {
						r := &p.Verify[j]
						if (r.File == fd.Path() || len(v.Search) > 0) && r.Proves(o, n) {
							proved = true
						}
					}
					if !proved {
						t.Errorf("%s variant %s: %s hunk %d (%s:%d) is proved by no verify rule", p.Name, v.Name, fd.Path(), i+1, h.Source, h.Line)
					}
				}
			}
		}
	}
}

// without is variant v with hunk k (counted across its diffs) left out.
func without(v *patches.Variant, k int) (*patches.Variant, string) {
	c := *v
	c.Files = nil
	n, what := 0, ""
	for _, fd := range v.Files {
		d := *fd
		d.Hunks = nil
		for _, h := range fd.Hunks {
			if n == k {
				what = fd.Path() + " " + h.Source
			} else {
				d.Hunks = append(d.Hunks, h)
			}
			n++
		}
		if len(d.Hunks) > 0 {
			c.Files = append(c.Files, &d)
		}
	}
	if len(c.Files) == 0 {
		c.Diffs = nil
	}
	return &c, what
}

// On each shape a variant was written for, leaving any one of its hunks
// out makes a verify rule fail on the result: the plan is refused.
func TestBuiltinLeavingAHunkOutIsRefused(t *testing.T) {
	for _, tc := range []struct{ patch, shape, variant string }{
		{allow, "c4-s3", "gate"},
		{allow, "c4-s3-preflight", "preflight"},
		{allow, "c4-s4-resolver", "resolver"},
		{allow, "c4-s5", "resolver"},
		{allow, "c5-s5", "platform"},
		{allow, "c6-s5", "platform"},
		{auto, "c4-s3", "server-args"},
		{auto, "c4-s5", "overrides"},
		{auto, "c5-s5", "overrides-platform"},
		{"sm12x-deepgemm-off", "deepgemm-lt90", "lt90"},
		{"sm12x-deepgemm-off", "deepgemm-musa", "musa"},
		{"sm12x-deepgemm-off", "deepgemm-sm120", "sm120"},
		{"sm12x-gpt-oss-mxfp4", "gpt-oss-elif", "elif"},
		{"sm12x-gpt-oss-mxfp4", "gpt-oss-if", "if"},
	} {
		p := builtinPatch(t, tc.patch)
		var v *patches.Variant
		for _, c := range p.Variants {
			if c.Name == tc.variant {
				v = c
			}
		}
		total := 0
		for _, fd := range v.Files {
			total += len(fd.Hunks)
		}
		_, tree := checkout(t, readShape(t, tc.shape))
		for k := 0; k < total; k++ {
			c, what := without(v, k)
			q := *p
			q.Variants = []*patches.Variant{c}
			pl := plan(t, &q, tree, patches.PlanOptions{Variant: tc.variant})
			if pl.Outcome() != patches.OutcomeRefused || !strings.HasPrefix(pl.Refused, "verify ") {
				t.Errorf("%s %s on %s without hunk %d (%s): %s (%s), want refused by a verify rule", tc.patch, tc.variant, tc.shape, k+1, what, pl.Outcome(), pl.Reason)
			}
		}
	}
}

// The trees of the wrong cases: a 0.5.10 version with the
// preflight, a 0.5.13.post2.dev7 version with the resolver, and a gate
// widened by hand in another spelling.
func TestBuiltinVariantByContentWhenVerifyFails(t *testing.T) {
	pa := builtinPatch(t, allow)
	for _, tc := range []struct {
		shape, variant, named string
		changes               int
	}{
		{"c4-s3-preflight-backport", "preflight", "gate", 2},
		{"c4-s4-resolver-dev", "resolver", "preflight", 2},
	} {
		_, tree := checkout(t, readShape(t, tc.shape))
		pl := plan(t, pa, tree, patches.PlanOptions{Strict: true})
		if pl.Outcome() != patches.OutcomeApplies || variantName(pl) != tc.variant {
			t.Fatalf("%s: %s with %q (%s; %s)", tc.shape, pl.Outcome(), variantName(pl), pl.VariantReason, pl.Reason)
		}
		if want := "matches " + tc.named + ", which leaves a verify rule unmet (verify "; !strings.Contains(pl.VariantReason, want) || !strings.Contains(pl.VariantReason, "by content, "+tc.variant) {
			t.Errorf("%s: reason %q, want it to say %q and that %s was chosen by content", tc.shape, pl.VariantReason, want, tc.variant)
		}
		if n := len(pl.Changes()); n != tc.changes {
			t.Errorf("%s: %d files changed, want %d", tc.shape, n, tc.changes)
		}
		// The version's variant, named: refused, the rule it leaves unmet
		// in the reason.
		forced := plan(t, pa, tree, patches.PlanOptions{Variant: tc.named})
		if forced.Outcome() != patches.OutcomeRefused || !strings.Contains(forced.Refused, "is not in place on the result") {
			t.Errorf("%s: variant %s named: %s (%s), want refused by a verify rule", tc.shape, tc.named, forced.Outcome(), forced.Reason)
		}
	}
}

func TestBuiltinHandEditGetsTheRest(t *testing.T) {
	pa := builtinPatch(t, allow)
	const comm = "python/sglang/srt/layers/communicator.py"
	files := readShape(t, "c4-s4-hand-edit")
	dir, tree := checkout(t, files)
	pl := plan(t, pa, tree, patches.PlanOptions{Strict: true})
	if pl.Outcome() != patches.OutcomeApplies || variantName(pl) != "resolver" {
		t.Fatalf("%s with %q (%s; %s)", pl.Outcome(), variantName(pl), pl.VariantReason, pl.Reason)
	}
	equivalent := 0
	for _, f := range pl.Files {
		for _, h := range f.Hunks {
			switch {
			case h.Status == patches.AlreadyApplied && f.Path == comm && strings.Contains(h.Reason, "an equivalent change is already there (the fusion gate admits SM12x)"):
				equivalent++
				if h.Index != 2 {
					t.Errorf("the equivalent hunk is #%d, want the gate's, #3", h.Index+1)
				}
				if h.Line == 0 || !strings.Contains(strings.Split(string(files[comm]), "\n")[h.Line-1], "or is_sm120_supported())") {
					t.Errorf("equivalent hunk at line %d, want the hand-edited gate's line", h.Line)
				}
			case h.Status != patches.Exact && h.Status != patches.Offset:
				t.Errorf("%s hunk %d: %s (%s)", f.Path, h.Index+1, h.Status, h.Reason)
			}
		}
	}
	if equivalent != 1 {
		t.Errorf("%d hunks already applied as an equivalent change, want the gate's", equivalent)
	}
	changes := pl.Changes()
	if len(changes) != 2 {
		t.Errorf("changes %d files, want communicator.py (the flag) and flashinfer_comm_fusion.py", len(changes))
	}
	if got := string(changes[comm]); !strings.Contains(got, "or is_sm120_supported())\n") || strings.Contains(got, "or _is_sm120_supported)") {
		t.Errorf("the hand-edited gate was changed:\n%s", got)
	}
	checkPython(t, changes)
	write(t, dir, changes)
	again, err := source.OpenCheckout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o := plan(t, pa, again, patches.PlanOptions{Strict: true}).Outcome(); o != patches.OutcomeAlreadyApplied {
		t.Errorf("after writing: %s, want already-applied", o)
	}
}

// A rule that only says what must be gone proves nothing: a conflicting
// hunk on a tree where the unpatched text was replaced by something else
// stays a conflict.
func TestEquivalentNeedsAPositiveRule(t *testing.T) {
	pa := builtinPatch(t, allow)
	files := readShape(t, "c4-s4-resolver")
	const comm = "python/sglang/srt/layers/communicator.py"
	files[comm] = []byte(strings.Replace(string(files[comm]), "        (_is_sm90_supported or _is_sm100_supported)\n", "        (_is_sm90_supported)\n", 1))
	_, tree := checkout(t, files)
	pl := plan(t, pa, tree, patches.PlanOptions{Variant: "resolver"})
	if pl.Outcome() != patches.OutcomeConflict {
		t.Fatalf("gate narrowed upstream: %s (%s), want a conflict", pl.Outcome(), pl.Reason)
	}
}

package patches

import (
	"context"
	"strings"
	"testing"
)

// Two shapes of one file: C4 (function gate) and C5 (platform flags).
const (
	shapeC4 = "import torch\n_is_sm100_supported = _is_cuda and is_sm100_supported()\n\ndef apply_flashinfer_allreduce_fusion(batch_size):\n    return _is_sm100_supported\n"
	shapeC5 = "import torch\n_is_sm100_supported = _is_cuda and get_platform().is_sm100\n\ndef apply_flashinfer_allreduce_fusion(batch_size):\n    return _is_sm100_supported\n"
	diffC4  = "--- a/c.py\n+++ b/c.py\n@@ -1,3 +1,4 @@\n import torch\n _is_sm100_supported = _is_cuda and is_sm100_supported()\n+_is_sm120_supported = _is_cuda and is_sm120_supported()\n \n"
	diffC5  = "--- a/c.py\n+++ b/c.py\n@@ -1,3 +1,4 @@\n import torch\n _is_sm100_supported = _is_cuda and get_platform().is_sm100\n+_is_sm120_supported = _is_cuda and get_platform().is_sm120\n \n"
)

func TestVariantSelection(t *testing.T) {
	ctx := context.Background()
	c4 := func() *Variant { return variant(t, "c4", ">= 0.5.0, < 0.5.7", diffC4) }
	c5 := func() *Variant { return variant(t, "c5", ">= 0.5.7", diffC5) }
	tests := []struct {
		name     string
		variants []*Variant
		version  string
		file     string
		opts     PlanOptions
		want     string // chosen variant, "" for none
		outcome  Outcome
		reason   string // substring of VariantReason (or Reason when none)
		attempts int
	}{
		{"by version", []*Variant{c4(), c5()}, "0.5.6.post2", shapeC4, PlanOptions{}, "c4", OutcomeApplies,
			"version 0.5.6.post2 from python/sglang/version.py:1 matches >= 0.5.0, < 0.5.7", 1},
		{"pre-release by version", []*Variant{c4(), c5()}, "0.5.3rc2", shapeC4, PlanOptions{}, "c4", OutcomeApplies,
			"version 0.5.3rc2 from python/sglang/version.py:1 matches >= 0.5.0, < 0.5.7", 1},
		{"unknown version tries each", []*Variant{c4(), c5()}, "", shapeC5, PlanOptions{}, "c5", OutcomeApplies,
			"unknown version (no version.py, no dist-info, no tag); c5 (>= 0.5.7) is the first variant that resolves (tried c4)", 2},
		{"matching variant conflicts", []*Variant{c4(), c5()}, "0.5.6", shapeC5, PlanOptions{}, "c5", OutcomeApplies,
			"matches c4, which does not resolve; c5 (>= 0.5.7) resolves", 2},
		{"version outside every range", []*Variant{c4(), c5()}, "0.4.0", shapeC4, PlanOptions{}, "c4", OutcomeApplies,
			"version 0.4.0 from python/sglang/version.py:1 matches no variant's range; c4", 1},
		{"overlapping candidates", []*Variant{variant(t, "a", ">= 0.5.0", diffC4), variant(t, "b", ">= 0.5.0", diffC5)}, "0.5.9", shapeC5, PlanOptions{}, "b", OutcomeApplies,
			"matches 2 variants; b is the first that resolves", 2},
		{"forced", []*Variant{c4(), c5()}, "0.5.6", shapeC4, PlanOptions{Variant: "c5"}, "c5", OutcomeConflict,
			"variant c5 named explicitly", 1},
		{"forced unknown name", []*Variant{c4(), c5()}, "0.5.6", shapeC4, PlanOptions{Variant: "c9"}, "", OutcomeNoVariant,
			`has no variant "c9" (variants: c4, c5)`, 0},
		{"none resolves, version known", []*Variant{c4(), c5()}, "0.4.0", "other\n", PlanOptions{}, "", OutcomeNoVariant,
			"matches no variant's range (>= 0.5.0, < 0.5.7; >= 0.5.7), and no variant resolves", 2},
		{"none resolves, version matches", []*Variant{c4(), c5()}, "0.5.6", "other\n", PlanOptions{}, "c4", OutcomeConflict,
			"matches >= 0.5.0, < 0.5.7", 2},
		{"a range that admits any version says so", []*Variant{variant(t, "any", "", diffC4)}, "0.5.9", shapeC4, PlanOptions{}, "any", OutcomeApplies,
			"version 0.5.9 from python/sglang/version.py:1 matches any version", 1},
		{"any-version variant that does not resolve, version known", []*Variant{variant(t, "any", "", diffC4)}, "0.5.9", "other\n", PlanOptions{}, "any", OutcomeConflict,
			"matches any version", 1},
		{"already applied counts as resolved", []*Variant{c4(), c5()}, "", strings.Replace(shapeC5, "is_sm100\n", "is_sm100\n_is_sm120_supported = _is_cuda and get_platform().is_sm120\n", 1), PlanOptions{}, "c5", OutcomeAlreadyApplied,
			"c5 (>= 0.5.7) is the first variant that resolves", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Patch{Name: "sm120-fusion", Variants: tt.variants}
			tree := &mapTree{version: tt.version, files: map[string]string{"c.py": tt.file}}
			pl, err := NewPlan(ctx, p, tree, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := VariantLabel(pl.Variant); got != tt.want {
				t.Errorf("variant %q, want %q (%s)", got, tt.want, pl.VariantReason)
			}
			if pl.Outcome() != tt.outcome {
				t.Errorf("outcome %s, want %s (%s)", pl.Outcome(), tt.outcome, pl.Reason)
			}
			text := pl.VariantReason
			if tt.want == "" {
				text = pl.Reason
			}
			if !strings.Contains(text, tt.reason) {
				t.Errorf("reason %q, want it to contain %q", text, tt.reason)
			}
			if len(pl.Attempts) != tt.attempts {
				t.Errorf("attempts %+v, want %d", pl.Attempts, tt.attempts)
			}
		})
	}
}

func TestVariantStrict(t *testing.T) {
	// The only variant resolves fuzzily: fine normally, not with --strict.
	diff := "--- a/c.py\n+++ b/c.py\n@@ -1,6 +1,6 @@\n a\n b\n c\n-d\n+D\n e\n f\n"
	p := &Patch{Name: "x", Variants: []*Variant{variant(t, "v", ">= 0.1", diff)}}
	tree := &mapTree{version: "0.5.0", files: map[string]string{"c.py": "a\nB!\nc\nd\ne\nf\n"}}
	pl, err := NewPlan(context.Background(), p, tree, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Outcome() != OutcomeFuzzy || !pl.OK(false) || pl.OK(true) {
		t.Fatalf("outcome %s", pl.Outcome())
	}
	if string(pl.Changes()["c.py"]) != "a\nB!\nc\nD\ne\nf\n" {
		t.Errorf("changes %q", pl.Changes())
	}
	pl, _ = NewPlan(context.Background(), p, tree, PlanOptions{Strict: true})
	if pl.OK(true) || pl.Attempts[0].Reason != "fuzzy hunks (strict): c.py: hunk 1: 1 of 6 context lines changed" {
		t.Errorf("strict: %s %+v", pl.Outcome(), pl.Attempts)
	}
}

// Upstream shape C6: the fusion gate moved out of communicator.py into a
// residual/add_norm.py whose directory varies.
func TestAnchorSearch(t *testing.T) {
	diff := "--- a/python/sglang/srt/layers/communicator.py\n+++ b/python/sglang/srt/layers/communicator.py\n" +
		"@@ -10,3 +10,3 @@\n def apply_flashinfer_allreduce_fusion(batch_size):\n-    return _is_sm100_supported\n+    return _is_sm100_supported or _is_sm120_supported\n \n"
	moved := "import torch\n\n" + numbered(8) + "def apply_flashinfer_allreduce_fusion(batch_size):\n    return _is_sm100_supported\n\n"
	v := variant(t, "c6", ">= 0.6.0", diff)
	v.Search = []string{"python/sglang/srt/layers/"}
	p := &Patch{Name: "sm120-fusion", Variants: []*Variant{v}}
	ctx := context.Background()

	tree := &mapTree{version: "0.6.1", files: map[string]string{
		"python/sglang/srt/layers/fused/residual/add_norm.py": moved,
		"python/sglang/srt/layers/linear.py":                  "x = 1\n",
		"python/sglang/srt/layers/readme.md":                  moved, // another extension: not a candidate
	}}
	pl, err := NewPlan(ctx, p, tree, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Outcome() != OutcomeApplies {
		t.Fatalf("outcome %s: %s", pl.Outcome(), pl.Reason)
	}
	fp := pl.Files[0]
	if fp.Path != "python/sglang/srt/layers/fused/residual/add_norm.py" || !strings.Contains(fp.Note, "found by anchor") {
		t.Errorf("path %q note %q", fp.Path, fp.Note)
	}
	if ch := pl.Changes(); !strings.Contains(string(ch[fp.Path]), "_is_sm120_supported") || len(ch) != 1 {
		t.Errorf("changes %q", ch)
	}
	// The variant's label says where its hunks went.
	if want := "python/sglang/srt/layers/communicator.py found by search as python/sglang/srt/layers/fused/residual/add_norm.py"; !strings.Contains(pl.VariantReason, want) {
		t.Errorf("variant reason %q, want it to say %q", pl.VariantReason, want)
	}
	if d := string(pl.UnifiedDiff()); !strings.Contains(d, "+++ b/python/sglang/srt/layers/fused/residual/add_norm.py") {
		t.Errorf("diff:\n%s", d)
	}

	// Two equally good files: ambiguous, a conflict.
	tree.files["python/sglang/srt/layers/other/add_norm.py"] = moved
	pl, _ = NewPlan(ctx, p, tree, PlanOptions{})
	if pl.Outcome() != OutcomeConflict || !strings.Contains(pl.Reason, "ambiguous") {
		t.Errorf("ambiguous: %s %q", pl.Outcome(), pl.Reason)
	}
	// The file is still there but the code left it (shape C6 keeps a
	// communicator.py): the whole diff resolves in the moved file.
	delete(tree.files, "python/sglang/srt/layers/other/add_norm.py")
	tree.files["python/sglang/srt/layers/communicator.py"] = "from .fused.residual.add_norm import apply_flashinfer_allreduce_fusion\n"
	pl, _ = NewPlan(ctx, p, tree, PlanOptions{})
	if pl.Outcome() != OutcomeApplies || pl.Files[0].Path != "python/sglang/srt/layers/fused/residual/add_norm.py" ||
		!strings.Contains(pl.Files[0].Note, "python/sglang/srt/layers/communicator.py does not match") {
		t.Errorf("moved, file kept: %s %q %q", pl.Outcome(), pl.Files[0].Path, pl.Files[0].Note)
	}
	// Nowhere: file not found.
	tree = &mapTree{version: "0.6.1", files: map[string]string{"python/sglang/srt/layers/linear.py": "x = 1\n"}}
	pl, _ = NewPlan(ctx, p, tree, PlanOptions{})
	if pl.Outcome() != OutcomeConflict || !strings.Contains(pl.Reason, "file not found") {
		t.Errorf("missing: %s %q", pl.Outcome(), pl.Reason)
	}
}

func TestPlanUnifiedDiffAndCreate(t *testing.T) {
	diff := twoHunks + "--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+x\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
	p := &Patch{Name: "x", Variants: []*Variant{variant(t, "v", "", diff)}}
	tree := &mapTree{files: map[string]string{"f.py": numbered(20), "gone.py": "bye\n"}}
	pl, err := NewPlan(context.Background(), p, tree, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Outcome() != OutcomeApplies {
		t.Fatalf("outcome %s %s", pl.Outcome(), pl.Reason)
	}
	ch := pl.Changes()
	if b, ok := ch["gone.py"]; !ok || b != nil || string(ch["n.py"]) != "x\n" || len(ch) != 3 {
		t.Errorf("changes %q", ch)
	}
	want := "diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n@@ -2,7 +2,7 @@\n l2\n l3\n l4\n-l5\n+L5\n l6\n l7\n l8\n@@ -13,6 +13,7 @@\n l13\n l14\n l15\n+new\n l16\n l17\n l18\n" +
		"diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+x\n" +
		"diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
	if got := string(pl.UnifiedDiff()); got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
	// Applied tree: every hunk already applied, nothing changes.
	applied := &mapTree{files: map[string]string{"f.py": string(ch["f.py"]), "n.py": "x\n"}}
	pl, _ = NewPlan(context.Background(), p, applied, PlanOptions{})
	if pl.Outcome() != OutcomeAlreadyApplied || len(pl.Changes()) != 0 || len(pl.UnifiedDiff()) != 0 {
		t.Errorf("applied: %s %q", pl.Outcome(), pl.Changes())
	}
}

func TestCleanDir(t *testing.T) {
	for in, want := range map[string]string{"python/sglang/srt/layers/": "python/sglang/srt/layers", "a": "a", "": "", ".": "", "./a//b/": "a/b", "/": ""} {
		if got := cleanDir(in); got != want {
			t.Errorf("cleanDir(%q) = %q, want %q", in, got, want)
		}
	}
}

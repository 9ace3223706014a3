package patches_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/smpatch/smpatch/internal/synth"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
)

// The built-in catalog against our synthetic trees of each upstream shape
// (testdata/shapes/*.txtar): which variant is chosen, how every hunk
// resolves, and what the patched files look like.

func builtinPatch(t *testing.T) *patches.Patch {
	t.Helper()
	cat, err := patches.LoadCatalog(nil)
	if err != nil {
		t.Fatalf("loading the built-in catalog: %v", err)
	}
	p, err := cat.Get("sm120-fusion")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func readShape(t *testing.T, name string) map[string][]byte {
	t.Helper()
	a, err := txtar.ParseFile(filepath.Join("..", "testdata", "shapes", name+".txtar"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, f := range a.Files {
		files[f.Name] = f.Data
	}
	return files
}

// checkout writes files into a fresh directory and opens it as a checkout.
func checkout(t *testing.T, files map[string][]byte) (string, source.WritableTree) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := source.OpenCheckout(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, tree
}

func plan(t *testing.T, p *patches.Patch, tree source.Tree, opts patches.PlanOptions) *patches.Plan {
	t.Helper()
	pl, err := patches.NewPlan(context.Background(), p, tree, opts)
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	return pl
}

func variantName(pl *patches.Plan) string {
	if pl.Variant == nil {
		return ""
	}
	return pl.Variant.Name
}

func statuses(pl *patches.Plan) []string {
	var out []string
	for _, f := range pl.Files {
		for _, h := range f.Hunks {
			out = append(out, f.Path+"#"+h.Status.String())
		}
	}
	return out
}

func TestBuiltinShapes(t *testing.T) {
	p := builtinPatch(t)
	tests := []struct {
		shape   string
		variant string
		outcome patches.Outcome
		// files the plan changes, sorted
		changes []string
	}{
		{"c4-s3", "c4-s3", patches.OutcomeApplies, []string{
			"python/sglang/srt/layers/communicator.py",
			"python/sglang/srt/server_args.py",
		}},
		{"c4-s3-drift", "c4-s3", patches.OutcomeApplies, []string{
			"python/sglang/srt/layers/communicator.py",
			"python/sglang/srt/server_args.py",
		}},
		{"c5-s5", "c5-s5", patches.OutcomeApplies, []string{
			"python/sglang/srt/arg_groups/overrides.py",
			"python/sglang/srt/layers/communicator.py",
			"python/sglang/srt/layers/flashinfer_comm_fusion.py",
		}},
		{"c5-s5-applied", "c5-s5", patches.OutcomeAlreadyApplied, nil},
		{"c6-s5", "c6-s5", patches.OutcomeApplies, []string{
			"python/sglang/srt/arg_groups/overrides.py",
			"python/sglang/srt/layers/flashinfer_comm_fusion.py",
			"python/sglang/srt/layers/layer_boundary/residual/add_norm.py",
		}},
		{"c2", "", patches.OutcomeNoVariant, nil},
	}
	for _, tc := range tests {
		t.Run(tc.shape, func(t *testing.T) {
			files := readShape(t, tc.shape)
			dir, tree := checkout(t, files)
			pl := plan(t, p, tree, patches.PlanOptions{Strict: true})
			if got := pl.Outcome(); got != tc.outcome {
				t.Fatalf("outcome %s, want %s (%s; %s)", got, tc.outcome, pl.Reason, strings.Join(statuses(pl), " "))
			}
			if got := variantName(pl); got != tc.variant {
				t.Fatalf("variant %q, want %q (%s)", got, tc.variant, pl.VariantReason)
			}
			if pl.Version == "" {
				t.Errorf("no version read from the tree (%s)", pl.VersionFrom)
			}
			changes := pl.Changes()
			var changed []string
			for name := range changes {
				changed = append(changed, name)
			}
			sort.Strings(changed)
			if strings.Join(changed, " ") != strings.Join(tc.changes, " ") {
				t.Errorf("changes %v, want %v", changed, tc.changes)
			}
			if tc.outcome != patches.OutcomeApplies {
				return
			}
			for _, f := range pl.Files {
				for _, h := range f.Hunks {
					if h.Status != patches.Exact && h.Status != patches.Offset {
						t.Errorf("%s hunk %d: %s, want exact or offset", f.Path, h.Index+1, h.Status)
					}
				}
			}
			after := overlay(files, changes)
			checkVerify(t, p, after)
			checkDefinitions(t, changes)
			checkPython(t, changes)

			// Written to disk, the same patch is then already applied.
			write(t, dir, changes)
			again, err := source.OpenCheckout(dir)
			if err != nil {
				t.Fatal(err)
			}
			if o := plan(t, p, again, patches.PlanOptions{Strict: true}).Outcome(); o != patches.OutcomeAlreadyApplied {
				t.Errorf("planning again after writing: %s, want already-applied", o)
			}
		})
	}
}

// Drift moves the lines the hunks touch; each hunk must land further down
// by exactly the lines added above it.
func TestBuiltinDriftOffsets(t *testing.T) {
	p := builtinPatch(t)
	lines := func(shape string) map[string][]int {
		_, tree := checkout(t, readShape(t, shape))
		pl := plan(t, p, tree, patches.PlanOptions{Strict: true})
		out := map[string][]int{}
		for _, f := range pl.Files {
			for _, h := range f.Hunks {
				out[f.Path] = append(out[f.Path], h.Line)
			}
		}
		return out
	}
	base, drift := lines("c4-s3"), lines("c4-s3-drift")
	want := map[string][]int{
		// two imports above the first hunk, one inside it before the
		// change, then a class and a dataclass before the gate
		"python/sglang/srt/layers/communicator.py": {3, 21},
		// three fields and a method above the auto-enable
		"python/sglang/srt/server_args.py": {7},
	}
	for path, shifts := range want {
		if len(base[path]) != len(shifts) || len(drift[path]) != len(shifts) {
			t.Fatalf("%s: hunks at %v and %v, want %d each", path, base[path], drift[path], len(shifts))
		}
		for i, d := range shifts {
			if got := drift[path][i] - base[path][i]; got != d {
				t.Errorf("%s hunk %d: moved %d lines, want %d", path, i+1, got, d)
			}
		}
	}
}

// C2 is named as uncovered, and no variant can be forced onto it.
func TestBuiltinUncoveredC2(t *testing.T) {
	p := builtinPatch(t)
	found := false
	for _, u := range p.Uncovered {
		if strings.HasPrefix(u, "C2:") {
			found = true
		}
	}
	if !found {
		t.Errorf("uncovered = %q, want a C2 entry", p.Uncovered)
	}
	_, tree := checkout(t, readShape(t, "c2"))
	for _, v := range p.Variants {
		pl := plan(t, p, tree, patches.PlanOptions{Variant: v.Name})
		if o := pl.Outcome(); o != patches.OutcomeConflict {
			t.Errorf("variant %s forced on C2: %s, want conflict", v.Name, o)
		}
		if len(pl.Conflicts()) == 0 || pl.Changes() != nil {
			t.Errorf("variant %s forced on C2: conflicts %d, changes %v", v.Name, len(pl.Conflicts()), pl.Changes())
		}
	}
}

// A variant forced on a shape it was not written for conflicts: C4's
// diffs have no search directories, and C5's lines are nowhere in a C4 tree.
func TestBuiltinWrongVariantConflicts(t *testing.T) {
	p := builtinPatch(t)
	for _, tc := range []struct{ shape, variant string }{
		{"c5-s5", "c4-s3"},
		{"c6-s5", "c4-s3"},
		{"c4-s3", "c5-s5"},
		{"c4-s3", "c6-s5"},
	} {
		_, tree := checkout(t, readShape(t, tc.shape))
		pl := plan(t, p, tree, patches.PlanOptions{Variant: tc.variant})
		if o := pl.Outcome(); o != patches.OutcomeConflict {
			t.Errorf("%s forced on %s: %s, want conflict", tc.variant, tc.shape, o)
		}
		if pl.Changes() != nil {
			t.Errorf("%s forced on %s: a conflicting plan has changes", tc.variant, tc.shape)
		}
	}
}

// A version that names the wrong variant, or none, still finds the shape's
// variant by trying each.
func TestBuiltinVariantFallback(t *testing.T) {
	p := builtinPatch(t)
	for _, tc := range []struct {
		shape, version, variant string
	}{
		{"c4-s3", "", "c4-s3"},                         // unknown version
		{"c5-s5", "", "c5-s5"},                         // unknown version
		{"c4-s3", "0.5.17", "c4-s3"},                   // names c5-s5, which conflicts
		{"c5-s5", "0.0.0.dev9596+g29b7f22d8", "c5-s5"}, // names none
	} {
		files := readShape(t, tc.shape)
		delete(files, "python/sglang/version.py")
		if tc.version != "" {
			files["python/sglang/version.py"] = []byte("__version__ = \"" + tc.version + "\"\n")
		}
		_, tree := checkout(t, files)
		pl := plan(t, p, tree, patches.PlanOptions{Strict: true})
		if pl.Outcome() != patches.OutcomeApplies || variantName(pl) != tc.variant {
			t.Errorf("%s at version %q: %s with %q, want applies with %q (%s)",
				tc.shape, tc.version, pl.Outcome(), variantName(pl), tc.variant, pl.VariantReason)
		}
	}
}

// The C5 and C6 variants find the gate by its lines under
// python/sglang/srt/layers/ when it is not in the file their diff names:
// C6's variant on a C5 tree (add_norm.py absent), and C5's variant on a C6
// tree (communicator.py there, but without the gate).
func TestBuiltinAnchorSearch(t *testing.T) {
	p := builtinPatch(t)
	const (
		communicator = "python/sglang/srt/layers/communicator.py"
		addNorm      = "python/sglang/srt/layers/layer_boundary/residual/add_norm.py"
	)
	for _, tc := range []struct {
		shape, version, variant, diffPath, landsIn string
	}{
		{"c5-s5", "0.5.19", "c6-s5", addNorm, communicator},
		{"c6-s5", "0.5.16", "c5-s5", communicator, addNorm},
	} {
		files := readShape(t, tc.shape)
		files["python/sglang/version.py"] = []byte("__version__ = \"" + tc.version + "\"\n")
		_, tree := checkout(t, files)
		pl := plan(t, p, tree, patches.PlanOptions{Strict: true})
		if pl.Outcome() != patches.OutcomeApplies || variantName(pl) != tc.variant {
			t.Errorf("%s at %s: %s with %q, want applies with %s (%s; %s)", tc.shape, tc.version,
				pl.Outcome(), variantName(pl), tc.variant, pl.VariantReason, pl.Reason)
			continue
		}
		var fp *patches.FilePlan
		for _, f := range pl.Files {
			if f.Diff != nil && f.Diff.Path() == tc.diffPath {
				fp = f
			}
		}
		if fp == nil || fp.Path != tc.landsIn || fp.Note == "" {
			t.Errorf("%s at %s: the %s diff resolved to %+v, want %s found by anchor", tc.shape, tc.version, tc.diffPath, fp, tc.landsIn)
			continue
		}
		changes := pl.Changes()
		if _, ok := changes[tc.landsIn]; !ok {
			t.Errorf("%s at %s: %s not changed", tc.shape, tc.version, tc.landsIn)
		}
		checkVerify(t, p, overlay(files, changes))
		checkDefinitions(t, changes)
	}
}

// Full-size trees (target files padded to upstream size) resolve the same.
func TestBuiltinFullSize(t *testing.T) {
	p := builtinPatch(t)
	for _, shape := range []string{"c4-s3", "c5-s5", "c6-s5"} {
		files := synth.SGLangTree(shape, true)
		_, tree := checkout(t, files)
		pl := plan(t, p, tree, patches.PlanOptions{Strict: true})
		if pl.Outcome() != patches.OutcomeApplies || variantName(pl) != shape {
			t.Errorf("%s full size: %s with %q (%s)", shape, pl.Outcome(), variantName(pl), pl.Reason)
			continue
		}
		checkVerify(t, p, overlay(files, pl.Changes()))
	}
}

func overlay(files, changes map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range files {
		out[k] = v
	}
	for k, v := range changes {
		out[k] = v
	}
	return out
}

func write(t *testing.T, dir string, changes map[string][]byte) {
	t.Helper()
	for name, data := range changes {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkVerify applies the patch's verify rules to the patched files; as in
// apply, a rule on a file the tree does not have is skipped.
func checkVerify(t *testing.T, p *patches.Patch, files map[string][]byte) {
	t.Helper()
	if len(p.Verify) == 0 {
		t.Fatal("sm120-fusion has no verify rules")
	}
	checked := 0
	for _, r := range p.Verify {
		data, ok := files[r.File]
		if !ok {
			continue
		}
		checked++
		if r.Contains != "" && !bytes.Contains(data, []byte(r.Contains)) {
			t.Errorf("verify: %s does not contain %q", r.File, r.Contains)
		}
		if r.NotContains != "" && bytes.Contains(data, []byte(r.NotContains)) {
			t.Errorf("verify: %s still contains %q", r.File, r.NotContains)
		}
	}
	if checked == 0 {
		t.Error("no verify rule applies to this tree")
	}
}

var (
	usesPrivate = regexp.MustCompile(`\b_is_sm120_supported\b`)
	definesFlag = regexp.MustCompile(`(?m)^(_is_sm120_supported = |def _is_sm120_supported\()`)
	usesUtil    = regexp.MustCompile(`(^|[^_\w])is_sm120_supported\(`)
	importsUtil = regexp.MustCompile(`(?m)^\s+is_sm120_supported,$|import .*\bis_sm120_supported\b`)
	narrowGate  = regexp.MustCompile(`\(_is_sm90_supported or _is_sm100_supported\)`)
	sm120Gate   = regexp.MustCompile(`_is_sm120_supported\b`)
)

// checkDefinitions: every patched file that uses _is_sm120_supported
// defines it (upstream never does), and one that calls
// is_sm120_supported() imports it.
func checkDefinitions(t *testing.T, changes map[string][]byte) {
	t.Helper()
	for name, data := range changes {
		if usesPrivate.Match(data) && !definesFlag.Match(data) {
			t.Errorf("%s uses _is_sm120_supported without defining it", name)
		}
		if usesUtil.Match(data) && !importsUtil.Match(data) && !definesFlag.Match(data) {
			t.Errorf("%s calls is_sm120_supported() without importing it", name)
		}
		if narrowGate.Match(data) {
			t.Errorf("%s still gates on (_is_sm90_supported or _is_sm100_supported)", name)
		}
		if strings.HasSuffix(name, "communicator.py") || strings.HasSuffix(name, "add_norm.py") {
			if !sm120Gate.Match(data) {
				t.Errorf("%s: gate not widened", name)
			}
		}
	}
}

// checkPython parses the patched files with python3 when it is on PATH.
func checkPython(t *testing.T, changes map[string][]byte) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		return
	}
	dir := t.TempDir()
	var paths []string
	for name, data := range changes {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := "import ast, sys\nfor p in sys.argv[1:]:\n    ast.parse(open(p, encoding='utf-8').read(), p)\n"
	if out, err := exec.CommandContext(ctx, py, append([]string{"-I", "-c", script}, paths...)...).CombinedOutput(); err != nil {
		t.Errorf("patched files are not valid Python: %v\n%s", err, out)
	}
}

// The S5 hunk touches only the tail of the auto-enable pass, which reads the
// same in both upstream forms of its condition: is_sm90_supported() calls
// (as at sglang bc0c93b5e495) and get_platform() properties (later).
func TestBuiltinS5ConditionForms(t *testing.T) {
	p := builtinPatch(t)
	const overrides = "python/sglang/srt/arg_groups/overrides.py"
	files := readShape(t, "c5-s5")
	s5b := string(files[overrides])
	s5a := strings.NewReplacer(
		"from sglang.srt.runtime_context import get_platform\n",
		"from sglang.srt.utils.common import is_sm90_supported, is_sm100_supported\n",
		"(get_platform().is_sm90 or get_platform().is_sm100)",
		"(is_sm90_supported() or is_sm100_supported())",
		"(view.nnodes == 1 or get_platform().is_sm100)",
		"(view.nnodes == 1 or is_sm100_supported())",
	).Replace(s5b)
	if s5a == s5b || strings.Contains(s5a, "get_platform") {
		t.Fatal("the S5 fixture no longer has the get_platform() form this test rewrites")
	}
	files[overrides] = []byte(s5a)
	_, tree := checkout(t, files)
	pl := plan(t, p, tree, patches.PlanOptions{Strict: true})
	if pl.Outcome() != patches.OutcomeApplies || variantName(pl) != "c5-s5" {
		t.Fatalf("S5 with is_sm90_supported(): %s with %q (%s)", pl.Outcome(), variantName(pl), pl.Reason)
	}
	changes := pl.Changes()
	if !bytes.Contains(changes[overrides], []byte(`return {"flashinfer_allreduce_fusion_backend": "trtllm"}`)) {
		t.Errorf("%s: no trtllm branch after patching", overrides)
	}
	checkDefinitions(t, changes)
	checkPython(t, changes)
}

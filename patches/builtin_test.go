package patches_test

import (
	"github.com/smpatch/smpatch/patches/catalog"

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

	"github.com/smpatch/smpatch/internal/testkit/synth"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
)

// The built-in catalog against our synthetic trees of each upstream shape
// (testdata/shapes/*.txtar): which variant is chosen, how every hunk
// resolves, and what the patched files look like.

func builtinPatch(t *testing.T, name string) *patches.Patch {
	t.Helper()
	cat, err := catalog.Load(nil)
	if err != nil {
		t.Fatalf("loading the built-in catalog: %v", err)
	}
	p, err := cat.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	allow = "sm120-fusion"
	auto  = "sm120-fusion-auto"
)

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
	// A patch that needs another is planned on its result, as apply plans
	// the two named together.
	pl, err := patches.PlanWithNeeds(context.Background(), p, tree, opts)
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
	pa, pb := builtinPatch(t, allow), builtinPatch(t, auto)
	const (
		comm = "python/sglang/srt/layers/communicator.py"
		sa   = "python/sglang/srt/server_args.py"
		ov   = "python/sglang/srt/arg_groups/overrides.py"
		fcf  = "python/sglang/srt/layers/flashinfer_comm_fusion.py"
		an   = "python/sglang/srt/layers/layer_boundary/residual/add_norm.py"
		an7  = "python/sglang/srt/layers/communicator/residual/add_norm.py"
	)
	tests := []struct {
		shape        string
		allow, auto  string // variants chosen
		outcome      patches.Outcome
		allowChanges []string // files each plan changes, sorted
		autoChanges  []string
	}{
		{"c4-s3", "gate", "server-args", patches.OutcomeApplies, []string{comm}, []string{sa}},
		{"c4-s3-drift", "gate", "server-args", patches.OutcomeApplies, []string{comm}, []string{sa}},
		{"c4-s3-preflight", "preflight", "server-args", patches.OutcomeApplies, []string{comm, fcf}, []string{sa}},
		{"c4-s4-resolver", "resolver", "server-args", patches.OutcomeApplies, []string{comm, fcf}, []string{sa}},
		{"c4-s5", "resolver", "overrides", patches.OutcomeApplies, []string{comm, fcf}, []string{ov}},
		{"c5-s5", "platform", "overrides-platform", patches.OutcomeApplies, []string{comm, fcf}, []string{ov}},
		{"c5-s5-applied", "platform", "overrides-platform", patches.OutcomeAlreadyApplied, nil, nil},
		{"c6-s5", "platform", "overrides-platform", patches.OutcomeApplies, []string{fcf, an}, []string{ov}},
		{"c7-s5", "platform", "overrides-platform", patches.OutcomeApplies, []string{an7, fcf}, []string{ov}},
		{"c2", "", "", patches.OutcomeNoVariant, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.shape, func(t *testing.T) {
			files := readShape(t, tc.shape)
			dir, tree := checkout(t, files)
			pla := plan(t, pa, tree, patches.PlanOptions{Strict: true})
			plb := plan(t, pb, tree, patches.PlanOptions{Strict: true})
			for _, c := range []struct {
				pl      *patches.Plan
				variant string
				changes []string
			}{{pla, tc.allow, tc.allowChanges}, {plb, tc.auto, tc.autoChanges}} {
				name := c.pl.Patch.Name
				if got := c.pl.Outcome(); got != tc.outcome {
					t.Fatalf("%s: outcome %s, want %s (%s; %s)", name, got, tc.outcome, c.pl.Reason, strings.Join(statuses(c.pl), " "))
				}
				if got := variantName(c.pl); got != c.variant {
					t.Fatalf("%s: variant %q, want %q (%s)", name, got, c.variant, c.pl.VariantReason)
				}
				if c.pl.Version == "" {
					t.Errorf("%s: no version read from the tree (%s)", name, c.pl.VersionFrom)
				}
				var changed []string
				for f := range c.pl.Changes() {
					changed = append(changed, f)
				}
				sort.Strings(changed)
				if strings.Join(changed, " ") != strings.Join(c.changes, " ") {
					t.Errorf("%s: changes %v, want %v", name, changed, c.changes)
				}
				if tc.outcome != patches.OutcomeApplies {
					continue
				}
				for _, f := range c.pl.Files {
					for _, h := range f.Hunks {
						if h.Status != patches.Exact && h.Status != patches.Offset {
							t.Errorf("%s: %s hunk %d: %s, want exact or offset", name, f.Path, h.Index+1, h.Status)
						}
					}
				}
			}
			if tc.outcome != patches.OutcomeApplies {
				return
			}
			changes := overlay(pla.Changes(), plb.Changes())
			after := overlay(files, changes)
			checkVerify(t, pa, after)
			checkVerify(t, pb, after)
			checkDefinitions(t, changes)
			checkPython(t, changes)

			// Written to disk, both patches are then already applied.
			write(t, dir, changes)
			again, err := source.OpenCheckout(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []*patches.Patch{pa, pb} {
				if o := plan(t, p, again, patches.PlanOptions{Strict: true}).Outcome(); o != patches.OutcomeAlreadyApplied {
					t.Errorf("%s: planning again after writing: %s, want already-applied", p.Name, o)
				}
			}
		})
	}
}

// sm120-fusion-auto alone, on a tree without sm120-fusion, is refused
// before anything is written: it needs sm120-fusion (and its verify rules
// fail on the result); with sm120-fusion, in either order, it applies.
func TestBuiltinAutoNeedsAllow(t *testing.T) {
	pa, pb := builtinPatch(t, allow), builtinPatch(t, auto)
	for _, shape := range []string{"c4-s3", "c4-s5", "c6-s5"} {
		files := readShape(t, shape)
		dir, tree := checkout(t, files)
		set, err := patches.PlanSet(context.Background(), tree, []*patches.Patch{pb}, patches.SetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pl := set.Plans[0]; pl.Outcome() != patches.OutcomeRefused || !strings.HasPrefix(pl.Refused, "needs sm120-fusion,") {
			t.Fatalf("%s: auto plan %s (%s)", shape, pl.Outcome(), pl.Refused)
		}
		// Without needs, the verify rules alone refuse it on the plan.
		if pl, err := patches.NewPlan(context.Background(), pb, tree, patches.PlanOptions{}); err != nil || pl.Outcome() != patches.OutcomeRefused || !strings.Contains(pl.Refused, "still contains") {
			t.Fatalf("%s: auto without needs: %s (%s)", shape, pl.Outcome(), pl.Refused)
		}
		_, err = patches.Apply(context.Background(), tree, set, patches.ApplyOptions{})
		if err == nil || !strings.Contains(err.Error(), "needs sm120-fusion") {
			t.Fatalf("%s: auto alone: err %v, want a needs refusal", shape, err)
		}
		if _, serr := os.Stat(filepath.Join(dir, ".smpatch")); serr == nil {
			t.Errorf("%s: a refused apply created the journal", shape)
		}
		for name, data := range files {
			got, rerr := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
			if rerr != nil || !bytes.Equal(got, data) {
				t.Errorf("%s: %s changed by a refused apply", shape, name)
			}
		}
		both, err := patches.PlanSet(context.Background(), tree, []*patches.Patch{pa, pb}, patches.SetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := patches.Apply(context.Background(), tree, both, patches.ApplyOptions{}); err != nil {
			t.Errorf("%s: %s then %s: %v", shape, allow, auto, err)
		}
	}
}

// Drift moves the lines the hunks touch; each hunk must land further down
// by exactly the lines added above it.
func TestBuiltinDriftOffsets(t *testing.T) {
	lines := func(p *patches.Patch, shape string) map[string][]int {
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
	want := map[string][]int{
		// two imports above the import list, one inside it; then a class
		// and a dataclass before the gate
		"python/sglang/srt/layers/communicator.py": {3, 3, 21},
		// three fields and a method above the auto-enable
		"python/sglang/srt/server_args.py": {7},
	}
	for _, p := range []*patches.Patch{builtinPatch(t, allow), builtinPatch(t, auto)} {
		base, drift := lines(p, "c4-s3"), lines(p, "c4-s3-drift")
		for path, shifts := range want {
			if base[path] == nil {
				continue
			}
			if len(base[path]) != len(shifts) || len(drift[path]) != len(shifts) {
				t.Fatalf("%s %s: hunks at %v and %v, want %d each", p.Name, path, base[path], drift[path], len(shifts))
			}
			for i, d := range shifts {
				if got := drift[path][i] - base[path][i]; got != d {
					t.Errorf("%s %s hunk %d: moved %d lines, want %d", p.Name, path, i+1, got, d)
				}
			}
		}
	}
}

// No hunk carries lines that change between releases as context: model
// names, neighbouring conditions of the auto-enable, log messages.
func TestBuiltinHunksAvoidVolatileContext(t *testing.T) {
	volatile := regexp.MustCompile(`For(CausalLM|ConditionalGeneration)|tp_size|nnodes|attn_cp_size|enable_dp_attention|moe_a2a_backend|is_h20_device|logger\.|prefer_custom`)
	for _, name := range []string{allow, auto} {
		p := builtinPatch(t, name)
		seen := map[string]bool{}
		for _, v := range p.Variants {
			for _, d := range v.Diffs {
				if seen[d] {
					continue
				}
				seen[d] = true
				data, err := os.ReadFile(filepath.Join("catalog", filepath.FromSlash(d)))
				if err != nil {
					t.Fatal(err)
				}
				for i, l := range strings.Split(string(data), "\n") {
					if strings.HasPrefix(l, " ") && volatile.MatchString(l) {
						t.Errorf("%s:%d: volatile context line %q", d, i+1, l)
					}
					if strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "---") {
						// Every removed line comes back widened, never narrowed.
						if !strings.Contains(string(data), "+"+strings.TrimSuffix(strings.TrimSuffix(l[1:], ")"), "):")) {
							t.Errorf("%s:%d: removed line %q is not kept as the start of an added one", d, i+1, l)
						}
					}
				}
			}
		}
	}
}

// C2 is named as uncovered, and no variant can be forced onto it.
func TestBuiltinUncoveredC2(t *testing.T) {
	for _, name := range []string{allow, auto} {
		p := builtinPatch(t, name)
		found := false
		for _, u := range p.Uncovered {
			if u.Name == "C2" && u.Detectable() {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: uncovered = %q, want a C2 entry", name, p.Uncovered)
		}
	}
	p := builtinPatch(t, allow)
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

// A variant forced on a shape it was not written for conflicts, so that
// trying the variants in order finds the one with every change the tree
// can take.
func TestBuiltinWrongVariantConflicts(t *testing.T) {
	for _, tc := range []struct{ patch, shape, variant string }{
		{allow, "c5-s5", "resolver"},
		{allow, "c6-s5", "gate"},
		{allow, "c4-s3", "platform"},
		{allow, "c4-s3", "resolver"},
		{allow, "c4-s3", "preflight"},
		{allow, "c4-s3-preflight", "resolver"},
		{auto, "c4-s3", "overrides"},
		{auto, "c4-s5", "server-args"},
		{auto, "c4-s5", "overrides-platform"},
		{auto, "c5-s5", "overrides"},
	} {
		p := builtinPatch(t, tc.patch)
		_, tree := checkout(t, readShape(t, tc.shape))
		pl := plan(t, p, tree, patches.PlanOptions{Variant: tc.variant})
		if o := pl.Outcome(); o != patches.OutcomeConflict {
			t.Errorf("%s: %s forced on %s: %s, want conflict", tc.patch, tc.variant, tc.shape, o)
		}
		if pl.Changes() != nil {
			t.Errorf("%s: %s forced on %s: a conflicting plan has changes", tc.patch, tc.variant, tc.shape)
		}
	}
}

// A version that names the wrong variant, or none, still finds the shape's
// variant by content: the first, in the catalog's newest-first order, whose
// hunks all resolve.
func TestBuiltinVariantFallback(t *testing.T) {
	for _, tc := range []struct {
		patch, shape, version, variant string
	}{
		{allow, "c4-s3", "", "gate"},                             // unknown version
		{allow, "c4-s3-preflight", "", "preflight"},              // unknown version
		{allow, "c4-s5", "", "resolver"},                         // unknown version
		{allow, "c5-s5", "", "platform"},                         // unknown version
		{allow, "c4-s3", "0.5.17", "gate"},                       // names resolver, which conflicts
		{allow, "c4-s5", "0.5.6.post2", "resolver"},              // a main checkout's nearest tag: names none
		{allow, "c5-s5", "0.0.0.dev9596+g29b7f22d8", "platform"}, // names none
		{auto, "c4-s3", "", "server-args"},                       // unknown version
		{auto, "c4-s5", "0.5.6.post2", "overrides"},              // names none
		{auto, "c5-s5", "0.5.16", "overrides-platform"},          // names overrides, which conflicts
	} {
		p := builtinPatch(t, tc.patch)
		files := readShape(t, tc.shape)
		delete(files, "python/sglang/version.py")
		if tc.version != "" {
			files["python/sglang/version.py"] = []byte("__version__ = \"" + tc.version + "\"\n")
		}
		_, tree := checkout(t, files)
		pl := plan(t, p, tree, patches.PlanOptions{Strict: true})
		if pl.Outcome() != patches.OutcomeApplies || variantName(pl) != tc.variant {
			t.Errorf("%s on %s at version %q: %s with %q, want applies with %q (%s)",
				tc.patch, tc.shape, tc.version, pl.Outcome(), variantName(pl), tc.variant, pl.VariantReason)
		}
	}
}

// The platform variant finds the gate by its lines under
// python/sglang/srt/layers/ when the file its diff names no longer holds
// it (communicator.py there, but without the gate).
func TestBuiltinAnchorSearch(t *testing.T) {
	p := builtinPatch(t, allow)
	const (
		communicator = "python/sglang/srt/layers/communicator.py"
		addNorm      = "python/sglang/srt/layers/layer_boundary/residual/add_norm.py"
	)
	files := readShape(t, "c6-s5")
	_, tree := checkout(t, files)
	pl := plan(t, p, tree, patches.PlanOptions{Strict: true})
	if pl.Outcome() != patches.OutcomeApplies || variantName(pl) != "platform" {
		t.Fatalf("c6-s5: %s with %q, want applies with platform (%s; %s)", pl.Outcome(), variantName(pl), pl.VariantReason, pl.Reason)
	}
	var fp *patches.FilePlan
	for _, f := range pl.Files {
		if f.Diff != nil && f.Diff.Path() == communicator {
			fp = f
		}
	}
	if fp == nil || fp.Path != addNorm || fp.Note == "" {
		t.Fatalf("c6-s5: the %s diff resolved to %+v, want %s found by anchor", communicator, fp, addNorm)
	}
	changes := pl.Changes()
	if _, ok := changes[addNorm]; !ok {
		t.Errorf("c6-s5: %s not changed", addNorm)
	}
	checkVerify(t, p, overlay(files, changes))
	checkDefinitions(t, changes)
}

// The auto-enable gains SM12x by widening its one SM90/SM100 line, so every
// other condition of upstream's pass holds for SM12x too, including ones
// added later (prefer_custom_dsv41 on the newest trees).
func TestBuiltinAutoKeepsNeighbouringConditions(t *testing.T) {
	p := builtinPatch(t, auto)
	const ov = "python/sglang/srt/arg_groups/overrides.py"
	for _, tc := range []struct{ shape, sm string }{
		{"c4-s5", "        and (is_sm90_supported() or is_sm100_supported())\n"},
		{"c5-s5", "        and (get_platform().is_sm90 or get_platform().is_sm100)\n"},
	} {
		files := readShape(t, tc.shape)
		src := string(files[ov])
		if !strings.Contains(src, tc.sm) {
			t.Fatalf("%s: the fixture lost its condition line %q", tc.shape, tc.sm)
		}
		const extra = "        and not prefer_custom_dsv41\n"
		files[ov] = []byte(strings.Replace(src, tc.sm, tc.sm+extra, 1))
		_, tree := checkout(t, files)
		pl := plan(t, p, tree, patches.PlanOptions{Strict: true})
		if pl.Outcome() != patches.OutcomeApplies {
			t.Fatalf("%s with prefer_custom_dsv41: %s (%s)", tc.shape, pl.Outcome(), pl.Reason)
		}
		got := string(pl.Changes()[ov])
		i := strings.Index(got, "is_sm120")
		j := strings.Index(got, extra)
		if i < 0 || j < i || strings.Count(got, extra) != 1 || strings.Count(got, "auto_enable") != strings.Count(src, "auto_enable") {
			t.Errorf("%s: the SM12x condition is not in the same test as prefer_custom_dsv41:\n%s", tc.shape, got)
		}
		checkPython(t, pl.Changes())
	}
}

// Full-size trees (target files padded to upstream size) resolve the same.
func TestBuiltinFullSize(t *testing.T) {
	p := builtinPatch(t, allow)
	for _, tc := range []struct{ shape, variant string }{
		{"c4-s3", "gate"}, {"c4-s5", "resolver"}, {"c5-s5", "platform"}, {"c6-s5", "platform"},
	} {
		files := synth.SGLangTree(tc.shape, true)
		_, tree := checkout(t, files)
		pl := plan(t, p, tree, patches.PlanOptions{Strict: true})
		if pl.Outcome() != patches.OutcomeApplies || variantName(pl) != tc.variant {
			t.Errorf("%s full size: %s with %q (%s)", tc.shape, pl.Outcome(), variantName(pl), pl.Reason)
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
		t.Fatalf("%s has no verify rules", p.Name)
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

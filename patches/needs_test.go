package patches

import (
	"github.com/smpatch/smpatch/patches/journal"

	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/source"
)

// needsCatalog is a catalog directory on disk loaded with no built-ins.
func needsCatalog(t *testing.T, files map[string]string) (*Catalog, error) {
	t.Helper()
	dir := t.TempDir()
	writeCatalog(t, dir, files)
	return loadCatalog(nil, []string{dir})
}

const (
	twoDiffA = "--- a/" + setFile + "\n+++ b/" + setFile + "\n@@ -1,3 +1,3 @@\n alpha = 1\n-beta = 2\n+beta = 22\n gamma = 3\n"
	// Planned on twoDiffA's result: its context has beta = 22.
	twoDiffB = "--- a/" + setFile + "\n+++ b/" + setFile + "\n@@ -2,3 +2,3 @@\n beta = 22\n-gamma = 3\n+gamma = 33\n delta = 4\n"
)

// Two diffs of one file in one variant are one file plan, the second
// planned on the first's result: apply writes the file once, the journal
// keeps one record for it, and revert restores the original.
func TestVariantTwoDiffsOfOneFile(t *testing.T) {
	ctx := context.Background()
	root, tr, _ := setFixture(t)
	before := snapshot(t, root)
	c, err := needsCatalog(t, map[string]string{
		"both.toml":   "name = \"both\"\nproject = \"sglang\"\n[[variant]]\nversions = \"\"\ndiffs = [\"both/a.diff\", \"both/b.diff\"]\n",
		"both/a.diff": twoDiffA,
		"both/b.diff": twoDiffB,
	})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.Get("both")
	pl := plan(t, p, tr)
	if len(pl.Files) != 1 {
		t.Fatalf("%d file plans for one file, want 1", len(pl.Files))
	}
	fp := pl.Files[0]
	if len(fp.Hunks) != 2 || fp.Hunks[0].Index != 0 || fp.Hunks[1].Index != 1 {
		t.Fatalf("hunks %+v, want #1 and #2", fp.Hunks)
	}
	if got := fp.Diff.Hunks[1].Source; !strings.HasSuffix(got, "both/b.diff") {
		t.Errorf("hunk #2 comes from %q, want both/b.diff", got)
	}
	res, err := Apply(ctx, tr, setOf(tr, pl), ApplyOptions{ToolVersion: "test"})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if n := len(res.Patches[0].Files); n != 1 {
		t.Errorf("%d files reported, want 1", n)
	}
	got, _ := os.ReadFile(filepath.Join(root, setFile))
	if want := "alpha = 1\nbeta = 22\ngamma = 33\ndelta = 4\n"; string(got) != want {
		t.Fatalf("after apply:\n%s\nwant:\n%s", got, want)
	}
	st, err := ReadState(ctx, tr)
	if err != nil {
		t.Fatal(err)
	}
	if e := st.Get("both"); e == nil || len(e.Files) != 1 || e.State != journal.Applied {
		t.Fatalf("journal entry %+v, want one applied file", e)
	}
	if _, err := Revert(ctx, tr, c, []string{"both"}, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, root); !sameSnap(before, after) {
		t.Errorf("revert did not restore the tree: %s", diffSnap(before, after))
	}
}

// A conflict in the second diff of a file makes the whole file plan
// conflict, with the hunk numbered after the first diff's.
func TestVariantTwoDiffsSecondConflicts(t *testing.T) {
	_, tr, _ := setFixture(t)
	bad := strings.Replace(twoDiffB, "-gamma = 3\n", "-gamma = 300\n", 1)
	c, err := needsCatalog(t, map[string]string{
		"both.toml":   "name = \"both\"\nproject = \"sglang\"\n[[variant]]\nversions = \"\"\ndiffs = [\"both/a.diff\", \"both/b.diff\"]\n",
		"both/a.diff": twoDiffA,
		"both/b.diff": bad,
	})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.Get("both")
	pl := plan(t, p, tr)
	if pl.Outcome() != OutcomeConflict || len(pl.Files) != 1 || pl.Files[0].New != nil {
		t.Fatalf("outcome %s, %d file plans", pl.Outcome(), len(pl.Files))
	}
	if cs := pl.Conflicts(); len(cs) != 1 || cs[0].Index != 1 {
		t.Fatalf("conflicts %+v, want hunk #2", cs)
	}
	if r := ConflictReport(pl); !strings.Contains(r, "hunk #2 @@ -2,3 +2,3 @@") {
		t.Errorf("report:\n%s", r)
	}
}

const (
	baseDiff = "--- a/" + setFile + "\n+++ b/" + setFile + "\n@@ -1,2 +1,2 @@\n alpha = 1\n-beta = 2\n+beta = 22\n"
	topDiff  = "--- a/" + setFile + "\n+++ b/" + setFile + "\n@@ -3,2 +3,2 @@\n gamma = 3\n-delta = 4\n+delta = 44\n"
)

func needsFixture(t *testing.T) *Catalog {
	t.Helper()
	c, err := needsCatalog(t, map[string]string{
		"base.toml":   "name = \"base\"\nproject = \"sglang\"\n[[variant]]\nversions = \"\"\ndiffs = [\"base/a.diff\"]\n",
		"base/a.diff": baseDiff,
		"top.toml":    "name = \"top\"\nproject = \"sglang\"\nneeds = [\"base\"]\n[[variant]]\nversions = \"\"\ndiffs = [\"top/a.diff\"]\n",
		"top/a.diff":  topDiff,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A patch that needs another is refused alone on a tree without it, with
// nothing written; named with it (in either order) it applies after it;
// once the other is applied it applies alone; and the other cannot be
// reverted from under it.
func TestNeeds(t *testing.T) {
	ctx := context.Background()
	root, tr, _ := setFixture(t)
	before := snapshot(t, root)
	c := needsFixture(t)
	top, _ := c.GetAll([]string{"top"})
	s, err := PlanSet(ctx, tr, top, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Apply(ctx, tr, s, ApplyOptions{ToolVersion: "test"})
	var ce *ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("top alone: %v, want a conflict error", err)
	}
	if want := "top does not apply to "; !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), ": needs base, which the tree does not have: apply it first, or in the same command before top (smpatch apply base top); nothing was changed") {
		t.Errorf("error %q", err)
	}
	if ce.Problem.Plan.Outcome() != OutcomeRefused {
		t.Errorf("outcome %s, want refused", ce.Problem.Plan.Outcome())
	}
	if after := snapshot(t, root); !sameSnap(before, after) {
		t.Fatalf("refused apply changed the tree: %s", diffSnap(before, after))
	}
	if _, err := os.Stat(filepath.Join(root, ".smpatch")); err == nil {
		t.Fatal("refused apply created the journal")
	}

	// Named after it, the needed patch goes first.
	both, err := c.GetAll([]string{"top", "base"})
	if err != nil {
		t.Fatal(err)
	}
	if both[0].Name != "base" || both[1].Name != "top" {
		t.Fatalf("order %s, %s; want base, top", both[0].Name, both[1].Name)
	}
	s, err = PlanSet(ctx, tr, both, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, tr, s, ApplyOptions{ToolVersion: "test"}); err != nil {
		t.Fatalf("base and top: %v", err)
	}

	// Reverting base alone would leave top without it.
	_, err = Revert(ctx, tr, c, []string{"base"}, RevertOptions{})
	if !refused(err) || !strings.Contains(err.Error(), "top is applied and needs base: revert top first") {
		t.Fatalf("revert base under top: %v", err)
	}
	// top alone, then top again alone on a tree that has base.
	if _, err := Revert(ctx, tr, c, []string{"top"}, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err = PlanSet(ctx, tr, top, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if prob := s.Problem(); prob != nil {
		t.Fatalf("top on a tree with base: %v", prob)
	}
	if _, err := Apply(ctx, tr, s, ApplyOptions{ToolVersion: "test"}); err != nil {
		t.Fatal(err)
	}
	// Both at once: newest first.
	if _, err := Revert(ctx, tr, c, []string{"base", "top"}, RevertOptions{}); err != nil {
		t.Fatalf("revert both: %v", err)
	}
	if after := snapshot(t, root); !sameSnap(before, after) {
		t.Errorf("tree after reverting both: %s", diffSnap(before, after))
	}
}

// PlanWithNeeds plans the needed patches first on the same tree, as check
// does; a needed patch that does not resolve refuses the patch.
func TestPlanWithNeeds(t *testing.T) {
	ctx := context.Background()
	_, tr, _ := setFixture(t)
	c := needsFixture(t)
	top, _ := c.Get("top")
	pl, err := PlanWithNeeds(ctx, top, tr, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Outcome() != OutcomeApplies {
		t.Fatalf("top with base planned first: %s (%s)", pl.Outcome(), pl.Refused)
	}
	if got := top.Needed(); len(got) != 1 || got[0].Name != "base" {
		t.Errorf("Needed() = %v", got)
	}
	// A tree where base conflicts (but top's lines are untouched).
	root := t.TempDir()
	writeCatalog(t, root, map[string]string{
		"python/sglang/__init__.py": "",
		"python/sglang/version.py":  "__version__ = \"0.5.6\"\n",
		setFile:                     "alpha = 1\nbeta = 7\ngamma = 3\ndelta = 4\n",
	})
	other, err := source.OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	pl, err = PlanWithNeeds(ctx, top, other, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Outcome() != OutcomeRefused || !strings.HasPrefix(pl.Refused, "needs base, which does not apply here: ") {
		t.Fatalf("top where base conflicts: %s (%s)", pl.Outcome(), pl.Refused)
	}
}

func TestNeedsCatalogErrors(t *testing.T) {
	v := "[[variant]]\nversions = \"\"\ndiffs = [\"d/a.diff\"]\n"
	for _, tc := range []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"a.toml": "name = \"a\"\nproject = \"sglang\"\nneeds = [\"nope\"]\n" + v, "d/a.diff": baseDiff},
			`a.toml:3: needs "nope", which is not in the catalog`},
		{map[string]string{"a.toml": "name = \"a\"\nproject = \"sglang\"\nneeds = [\"a\"]\n" + v, "d/a.diff": baseDiff},
			`a.toml:3: needs: a patch cannot need itself`},
		{map[string]string{
			"a.toml": "name = \"a\"\nproject = \"sglang\"\nneeds = [\"b\"]\n" + v,
			"b.toml": "name = \"b\"\nproject = \"sglang\"\n\nneeds = [\"a\"]\n" + v, "d/a.diff": baseDiff},
			`a.toml:3: needs form a cycle: a -> b -> a`},
		{map[string]string{"a.toml": "name = \"a\"\nproject = \"sglang\"\nneeds = [\"f\"]\n" + v, "d/a.diff": baseDiff,
			"f.toml": "name = \"f\"\nproject = \"flashinfer\"\n[[variant]]\nversions = \"\"\ndiffs = [\"d/f.diff\"]\n", "d/f.diff": "--- a/flashinfer/x.py\n+++ b/flashinfer/x.py\n@@ -1 +1 @@\n-a\n+b\n"},
			`a.toml:3: needs "f", a flashinfer patch`},
	} {
		_, err := needsCatalog(t, tc.files)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// An uncovered shape with a marker is recognised where no variant
// resolves, and named in the one line that says why.
func TestUncoveredShapeDetected(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	writeCatalog(t, root, map[string]string{
		"python/sglang/__init__.py": "",
		"python/sglang/version.py":  "__version__ = \"0.5.6\"\n",
		setFile:                     "alpha = 1\nbeta = 7 # old gate\ngamma = 3\ndelta = 4\n",
	})
	tr, err := source.OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	toml := "name = \"s\"\nproject = \"sglang\"\n" +
		"[[uncovered]]\nname = \"X1\"\nwindow = \"0.5.6 and older\"\nwhy = \"the gate is inline there\"\nfile = \"" + setFile + "\"\nregex = 'beta = \\d+ # old gate'\n" +
		"[[variant]]\nversions = \"\"\ndiffs = [\"s/a.diff\"]\n"
	c, err := needsCatalog(t, map[string]string{"s.toml": toml, "s/a.diff": baseDiff})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.Get("s")
	s, err := PlanSet(ctx, tr, []*Patch{p}, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prob := s.Problem()
	if prob == nil || prob.Plan.Shape == nil || prob.Plan.Shape.Name != "X1" {
		t.Fatalf("problem %v, want shape X1", prob)
	}
	want := "this tree is shape X1 (0.5.6 and older), which the catalog does not cover: the gate is inline there (marker in " + setFile + ")"
	if prob.Why != want {
		t.Errorf("why %q\nwant %q", prob.Why, want)
	}
	// On the fixture without the marker: the conflict as before.
	_, plain, _ := setFixture(t)
	writeCatalog(t, plain.Root(), map[string]string{setFile: "alpha = 1\nbeta = 7\ngamma = 3\ndelta = 4\n"})
	if pl := plan(t, p, plain); pl.Shape != nil || !strings.Contains(pl.Reason, "hunk 1") {
		t.Errorf("no marker: shape %v, reason %q", pl.Shape, pl.Reason)
	}
}

func TestUncoveredCatalogForms(t *testing.T) {
	v := "[[variant]]\nversions = \"\"\ndiffs = [\"d/a.diff\"]\n"
	// A plain list still loads, as notes that are never detected.
	c, err := needsCatalog(t, map[string]string{"a.toml": "name = \"a\"\nproject = \"sglang\"\nuncovered = [\"C0: old trees\"]\n" + v, "d/a.diff": baseDiff})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.Get("a")
	if len(p.Uncovered) != 1 || p.Uncovered[0].Detectable() || p.Uncovered[0].String() != "C0: old trees" {
		t.Errorf("uncovered %+v", p.Uncovered)
	}
	for _, tc := range []struct{ entry, want string }{
		{"name = \"X\"\nwindow = \"w\"\nwhy = \"y\"\nfile = \"python/sglang/a.py\"\ncolour = \"red\"\ncontains = \"z\"\n", `a.toml:8: [[uncovered]] #1: unknown key "colour"`},
		{"name = \"X\"\nwindow = \"w\"\nwhy = \"y\"\nfile = \"python/sglang/a.py\"\n", `a.toml:3: [[uncovered]] #1: needs one of contains or regex`},
		{"name = \"X\"\nwhy = \"y\"\nfile = \"python/sglang/a.py\"\ncontains = \"z\"\n", `a.toml:3: [[uncovered]] #1: missing key "window"`},
		{"name = \"X\"\nwindow = \"w\"\nwhy = \"y\"\nfile = \"python/sglang/a.py\"\nregex = \"(\"\n", `a.toml:8: [[uncovered]] regex: error parsing regexp`},
		{"name = \"X\"\nwindow = \"w\"\nwhy = \"y\"\nfile = \"../a.py\"\ncontains = \"z\"\n", `a.toml:7: [[uncovered]] file:`},
	} {
		_, err := needsCatalog(t, map[string]string{"a.toml": "name = \"a\"\nproject = \"sglang\"\n[[uncovered]]\n" + tc.entry + v, "d/a.diff": baseDiff})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v\nwant %q", err, tc.want)
		}
	}
}

// A plan made by hand with two file plans for one path is refused before
// anything is written or journaled.
func TestApplyRefusesTwoFilePlansForOnePath(t *testing.T) {
	ctx := context.Background()
	root, tr, ps := setFixture(t)
	before := snapshot(t, root)
	a := plan(t, ps[0], tr)
	b := plan(t, ps[0], tr)
	pl := *a
	pl.Files = append(append([]*FilePlan(nil), a.Files...), b.Files...)
	_, err := Apply(ctx, tr, setOf(tr, &pl), ApplyOptions{ToolVersion: "test"})
	if err == nil || !strings.Contains(err.Error(), "two file plans for "+setFile) {
		t.Fatalf("err %v", err)
	}
	if after := snapshot(t, root); !sameSnap(before, after) {
		t.Errorf("tree changed: %s", diffSnap(before, after))
	}
	if st, err := ReadState(ctx, tr); err == nil && st.Get(ps[0].Name) != nil {
		t.Error("the journal kept an entry")
	}
}

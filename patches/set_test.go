package patches

import (
	"github.com/smpatch/smpatch/patches/catalog"

	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/smpatch/smpatch/source"
)

const setFile = "python/sglang/srt/x.py"

// setFixture is a checkout with one file and two patches whose hunks touch
// the same lines: "one" inserts a line after beta, "two" changes gamma
// right after beta, so on the result of "one" it only matches fuzzily.
func setFixture(t *testing.T) (string, source.WritableTree, []*Patch) {
	t.Helper()
	root := t.TempDir()
	for rel, body := range map[string]string{
		"python/sglang/__init__.py": "",
		"python/sglang/version.py":  "__version__ = \"0.5.6\"\n",
		setFile:                     "alpha = 1\nbeta = 2\ngamma = 3\ndelta = 4\n",
	} {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := source.OpenCheckout(root)
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"one.toml": {Data: []byte("name = \"one\"\nproject = \"sglang\"\n[[variant]]\nversions = \"\"\ndiffs = [\"one.diff\"]\n")},
		"one.diff": {Data: []byte("--- a/" + setFile + "\n+++ b/" + setFile + "\n@@ -1,4 +1,5 @@\n alpha = 1\n beta = 2\n+inserted = 0\n gamma = 3\n delta = 4\n")},
		"two.toml": {Data: []byte("name = \"two\"\nproject = \"sglang\"\n[[variant]]\nversions = \"\"\ndiffs = [\"two.diff\"]\n")},
		"two.diff": {Data: []byte("--- a/" + setFile + "\n+++ b/" + setFile + "\n@@ -2,2 +2,2 @@\n beta = 2\n-gamma = 3\n+gamma = 33\n")},
	}
	ps, err := catalog.LoadFS(fsys, "cat", "test")
	if err != nil {
		t.Fatal(err)
	}
	return root, tr, ps
}

// The second patch of a set is planned on the first one's result: under
// --strict the set does not apply, and the dry run says so exactly as the
// real run does, with nothing written.
func TestSetPlansOnTheResultOfEarlierPatches(t *testing.T) {
	ctx := context.Background()
	root, tr, ps := setFixture(t)
	before := snapshot(t, root)
	set, err := PlanSet(ctx, tr, ps, SetOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Plans[1].Outcome(); got != OutcomeFuzzy {
		t.Fatalf("two on one's result: %s", got)
	}
	prob := set.Problem()
	if prob == nil || prob.Plan.Patch.Name != "two" || !strings.Contains(prob.Why, "only matches fuzzily") || !strings.Contains(prob.Why, "(planned on top of one)") {
		t.Fatalf("problem: %v", prob)
	}
	var texts []string
	for _, dry := range []bool{true, false} {
		_, err := Apply(ctx, tr, set, ApplyOptions{DryRun: dry})
		var ce *ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("dry run %v: %v", dry, err)
		}
		texts = append(texts, err.Error())
	}
	if texts[0] != texts[1] {
		t.Errorf("dry run says %q, the real run %q", texts[0], texts[1])
	}
	if !sameSnap(before, snapshot(t, root)) {
		t.Fatalf("changed: %s", diffSnap(before, snapshot(t, root)))
	}
	// Without --strict both apply, the second on top of the first.
	set, err = PlanSet(ctx, tr, ps, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, tr, set, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(root, setFile))
	if want := "alpha = 1\nbeta = 2\ninserted = 0\ngamma = 33\ndelta = 4\n"; string(got) != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}
}

// A set planned before the tree changed is planned again under the lock,
// on the bytes the disk has then.
func TestApplyPlansAgainWhenTheTreeChanged(t *testing.T) {
	ctx := context.Background()
	root, tr, ps := setFixture(t)
	set, err := PlanSet(ctx, tr, ps[:1], SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, setFile)
	if err := os.WriteFile(p, []byte("# header\nalpha = 1\nbeta = 2\ngamma = 3\ndelta = 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Apply(ctx, tr, set, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	if want := "# header\nalpha = 1\nbeta = 2\ninserted = 0\ngamma = 3\ndelta = 4\n"; string(got) != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}
	if res.Set == set {
		t.Error("the set was not planned again")
	}
}

package patches

import (
	"github.com/smpatch/smpatch/patches/udiff"

	"context"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/source"
)

// mapTree is an in-memory source.Tree for tests.
type mapTree struct {
	files   map[string]string
	version string // "" for unknown
	readErr error
}

func (m *mapTree) Root() string            { return "mem" }
func (m *mapTree) Kind() source.Kind       { return source.KindCheckout }
func (m *mapTree) Project() source.Project { return source.SGLang }
func (m *mapTree) Version(ctx context.Context) (*version.Version, string, error) {
	if m.version == "" {
		return nil, "unknown: no version.py, no dist-info, no tag", nil // as real trees say it
	}
	v, err := source.ParseVersion(m.version)
	return v, "python/sglang/version.py:1", err
}
func (m *mapTree) ReadFile(rel string) ([]byte, error) {
	if m.readErr != nil {
		return nil, m.readErr
	}
	s, ok := m.files[rel]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: fs.ErrNotExist}
	}
	return []byte(s), nil
}
func (m *mapTree) ListFiles(dir string) ([]string, error) {
	var out []string
	for p := range m.files {
		if dir == "" || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

// numbered returns lines "l1".."ln", each ending in "\n".
func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "l%d\n", i)
	}
	return b.String()
}

func mustDiff(t *testing.T, s string) []*FileDiff {
	t.Helper()
	fds, err := udiff.Parse("test.diff", []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return fds
}

func variant(t *testing.T, name, versions, diff string) *Variant {
	t.Helper()
	v := &Variant{Name: name, Versions: versions, Files: mustDiff(t, diff)}
	if versions != "" {
		cs, err := source.ParseConstraints(versions)
		if err != nil {
			t.Fatal(err)
		}
		v.Constraints = cs
	}
	return v
}

// A two-hunk diff on numbered(20): change l5, insert after l15.
const twoHunks = `--- a/f.py
+++ b/f.py
@@ -4,3 +4,3 @@
 l4
-l5
+L5
 l6
@@ -14,3 +14,4 @@
 l14
 l15
+new
 l16
`

func TestNewPlanAllOrNothing(t *testing.T) {
	diff := twoHunks + `--- a/g.py
+++ b/g.py
@@ -1,2 +1,2 @@
 a
-b
+B
`
	p := &Patch{Name: "p", Variants: []*Variant{variant(t, "v1", ">= 0.5.0", diff)}}
	good := &mapTree{version: "0.5.6.post2", files: map[string]string{"f.py": numbered(20), "g.py": "a\nb\n"}}
	pl, err := NewPlan(context.Background(), p, good, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Outcome() != OutcomeApplies || !pl.OK(true) {
		t.Fatalf("outcome %s: %s", pl.Outcome(), pl.Reason)
	}
	ch := pl.Changes()
	if len(ch) != 2 || string(ch["g.py"]) != "a\nB\n" {
		t.Errorf("changes %q", ch)
	}
	if pl.VariantReason != "version 0.5.6.post2 from python/sglang/version.py:1 matches >= 0.5.0" {
		t.Errorf("reason %q", pl.VariantReason)
	}
	bad := &mapTree{version: "0.5.6", files: map[string]string{"f.py": numbered(20), "g.py": "a\nc\n"}}
	pl, err = NewPlan(context.Background(), p, bad, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Outcome() != OutcomeConflict || pl.OK(false) || pl.Changes() != nil || pl.UnifiedDiff() != nil {
		t.Fatalf("outcome %s, changes %v", pl.Outcome(), pl.Changes())
	}
	cs := pl.Conflicts()
	if len(cs) != 1 || cs[0].Path != "g.py" || !strings.Contains(pl.Reason, "g.py: hunk 1") {
		t.Errorf("conflicts %+v reason %q", cs, pl.Reason)
	}
	// A missing target is a conflict, an I/O error is an error.
	missing := &mapTree{version: "0.5.6", files: map[string]string{"f.py": numbered(20)}}
	pl, _ = NewPlan(context.Background(), p, missing, PlanOptions{})
	if pl.Outcome() != OutcomeConflict || !strings.Contains(pl.Reason, "file not found") {
		t.Errorf("missing: %s %q", pl.Outcome(), pl.Reason)
	}
	broken := &mapTree{version: "0.5.6", readErr: fs.ErrPermission}
	if _, err := NewPlan(context.Background(), p, broken, PlanOptions{}); err == nil {
		t.Error("I/O error not returned")
	}
}

package patches

import (
	"context"
	"encoding/json"
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
	fds, err := ParseDiff("test.diff", []byte(s))
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

func TestMatchFileStatuses(t *testing.T) {
	base := numbered(20)
	tests := []struct {
		name     string
		old      string
		diff     string
		statuses []HunkStatus
		offsets  []int
		want     string // new bytes; "" when conflict
	}{
		{
			name: "exact", old: base, diff: twoHunks,
			statuses: []HunkStatus{Exact, Exact}, offsets: []int{0, 0},
			want: strings.Replace(strings.Replace(base, "l5\n", "L5\n", 1), "l15\n", "l15\nnew\n", 1),
		},
		{
			name: "offset", old: "a\nb\nc\n" + base, diff: twoHunks,
			statuses: []HunkStatus{Offset, Offset}, offsets: []int{3, 3},
			want: "a\nb\nc\n" + strings.Replace(strings.Replace(base, "l5\n", "L5\n", 1), "l15\n", "l15\nnew\n", 1),
		},
		{
			name: "offset between hunks", old: strings.Replace(base, "l10\n", "l10\nx\ny\n", 1), diff: twoHunks,
			statuses: []HunkStatus{Exact, Offset}, offsets: []int{0, 2},
			want: strings.Replace(strings.Replace(strings.Replace(base, "l10\n", "l10\nx\ny\n", 1), "l5\n", "L5\n", 1), "l15\n", "l15\nnew\n", 1),
		},
		{
			name: "already applied", old: strings.Replace(strings.Replace(base, "l5\n", "L5\n", 1), "l15\n", "l15\nnew\n", 1), diff: twoHunks,
			statuses: []HunkStatus{AlreadyApplied, AlreadyApplied}, offsets: []int{0, 0},
			want: strings.Replace(strings.Replace(base, "l5\n", "L5\n", 1), "l15\n", "l15\nnew\n", 1),
		},
		{
			name: "half applied", old: strings.Replace(base, "l5\n", "L5\n", 1), diff: twoHunks,
			statuses: []HunkStatus{AlreadyApplied, Exact}, offsets: []int{0, 0},
			want: strings.Replace(strings.Replace(base, "l5\n", "L5\n", 1), "l15\n", "l15\nnew\n", 1),
		},
		{
			name: "conflict", old: strings.Replace(base, "l5\n", "changed\n", 1), diff: twoHunks,
			statuses: []HunkStatus{Conflict, Exact}, offsets: []int{0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd := mustDiff(t, tt.diff)[0]
			fp, err := MatchFile([]byte(tt.old), fd, PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range fp.Hunks {
				if h.Status != tt.statuses[i] || (h.Status != Conflict && h.Offset != tt.offsets[i]) {
					t.Errorf("hunk %d: %s offset %d (%s), want %s offset %d", i, h.Status, h.Offset, h.Reason, tt.statuses[i], tt.offsets[i])
				}
			}
			if tt.want == "" {
				if fp.New != nil {
					t.Errorf("conflict produced bytes")
				}
				return
			}
			if string(fp.New) != tt.want {
				t.Errorf("new:\n%s\nwant:\n%s", fp.New, tt.want)
			}
		})
	}
}

func TestConflictNearest(t *testing.T) {
	old := strings.Replace(numbered(40), "l5\n", "l5 edited\n", 1)
	fp, _ := MatchFile([]byte(old), mustDiff(t, twoHunks)[0], PlanOptions{})
	h := fp.Hunks[0]
	if h.Status != Conflict || h.Nearest == nil || h.Reason == "" {
		t.Fatalf("got %+v", h)
	}
	if h.Nearest.Start > 5 || h.Nearest.End < 5 || !strings.Contains(h.Nearest.Text, "l5 edited") {
		t.Errorf("nearest region %+v", h.Nearest)
	}
	// Nothing similar anywhere.
	fp, _ = MatchFile([]byte("zzz\n"), mustDiff(t, twoHunks)[0], PlanOptions{})
	if h := fp.Hunks[0]; h.Status != Conflict || !strings.Contains(h.Reason, "no similar region") {
		t.Errorf("got %+v", h)
	}
}

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

// TestHunkResultJSONKeys: docs/engine.md lists score, reason and nearest as
// keys of every hunk; they are present even when there is nothing to say.
func TestHunkResultJSONKeys(t *testing.T) {
	b, err := json.Marshal(HunkResult{Path: "a.py", Status: Exact, Line: 3})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"path", "index", "status", "line", "offset", "score", "reason", "nearest"} {
		if _, ok := m[k]; !ok {
			t.Errorf("key %q missing from %s", k, b)
		}
	}
	if m["nearest"] != nil {
		t.Errorf("nearest = %v, want null", m["nearest"])
	}
}

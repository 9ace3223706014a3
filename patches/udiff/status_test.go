package udiff

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

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
	fds, err := Parse("test.diff", []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return fds
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

func TestMatchStatuses(t *testing.T) {
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
			fp := Match([]byte(tt.old), fd)
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
	fp := Match([]byte(old), mustDiff(t, twoHunks)[0])
	h := fp.Hunks[0]
	if h.Status != Conflict || h.Nearest == nil || h.Reason == "" {
		t.Fatalf("got %+v", h)
	}
	if h.Nearest.Start > 5 || h.Nearest.End < 5 || !strings.Contains(h.Nearest.Text, "l5 edited") {
		t.Errorf("nearest region %+v", h.Nearest)
	}
	// Nothing similar anywhere.
	fp = Match([]byte("zzz\n"), mustDiff(t, twoHunks)[0])
	if h := fp.Hunks[0]; h.Status != Conflict || !strings.Contains(h.Reason, "no similar region") {
		t.Errorf("got %+v", h)
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

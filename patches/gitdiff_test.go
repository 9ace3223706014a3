package patches

import (
	"github.com/smpatch/smpatch/patches/udiff"

	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

// TestGitDiffFixture plans a real `git diff` output against the tree it was
// made from and checks the result against the tree git wrote.
func TestGitDiffFixture(t *testing.T) {
	ar, err := txtar.ParseFile("testdata/gitdiff.txtar")
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]string{}
	want := map[string]string{}
	var diff []byte
	for _, f := range ar.Files {
		data := f.Data
		if strings.HasSuffix(f.Name, "/nonl.txt") {
			data = bytes.TrimSuffix(data, []byte("\n"))
		}
		switch {
		case f.Name == "diff":
			diff = data
		case strings.HasPrefix(f.Name, "base/"):
			base[strings.TrimPrefix(f.Name, "base/")] = string(data)
		case strings.HasPrefix(f.Name, "want/"):
			want[strings.TrimPrefix(f.Name, "want/")] = string(data)
		}
	}
	fds, err := udiff.Parse("gitdiff.diff", diff)
	if err != nil {
		t.Fatal(err)
	}
	p := &Patch{Name: "git", Variants: []*Variant{{Name: "all", Files: fds}}}
	pl, err := NewPlan(context.Background(), p, &mapTree{files: base}, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Outcome() != OutcomeApplies {
		t.Fatalf("outcome %s: %s", pl.Outcome(), pl.Reason)
	}
	got := map[string]string{}
	for k, v := range base {
		got[k] = v
	}
	for k, v := range pl.Changes() {
		if v == nil {
			delete(got, k)
			continue
		}
		got[k] = string(v)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: should be gone", k)
		}
	}
	// The plan's own diff, applied to the base, gives the same tree.
	fds2, err := udiff.Parse("plan.diff", pl.UnifiedDiff())
	if err != nil {
		t.Fatalf("%v\n%s", err, pl.UnifiedDiff())
	}
	pl2, _ := NewPlan(context.Background(), &Patch{Name: "again", Variants: []*Variant{{Name: "all", Files: fds2}}}, &mapTree{files: base}, PlanOptions{})
	if pl2.Outcome() != OutcomeApplies {
		t.Fatalf("plan diff: %s %s", pl2.Outcome(), pl2.Reason)
	}
	for k, v := range pl.Changes() {
		if !bytes.Equal(pl2.Changes()[k], v) {
			t.Errorf("plan diff on %s: %q, want %q", k, pl2.Changes()[k], v)
		}
	}
	// Reversed on the patched tree, the diff restores the base.
	var rev []*FileDiff
	for _, fd := range fds {
		rev = append(rev, fd.Reverse())
	}
	pl3, _ := NewPlan(context.Background(), &Patch{Name: "rev", Variants: []*Variant{{Name: "all", Files: rev}}}, &mapTree{files: got}, PlanOptions{})
	if pl3.Outcome() != OutcomeApplies {
		t.Fatalf("reverse: %s %s", pl3.Outcome(), pl3.Reason)
	}
	for k, v := range pl3.Changes() {
		if b, ok := base[k]; (v == nil) == ok || string(v) != b {
			t.Errorf("reverse %s: %q, want %q", k, v, b)
		}
	}
}

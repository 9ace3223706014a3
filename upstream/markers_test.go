package upstream

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/smpatch/smpatch/internal/testkit/gitbuild"
	"github.com/smpatch/smpatch/source"
)

// TestWalkMarkers: over a synthetic history where a marker appears, an
// unrelated file changes, and the marker goes again, the walk reports the
// states at the start and the tip, the two changes with their commits,
// and evaluates only the commits that changed a watched file.
func TestWalkMarkers(t *testing.T) {
	b, err := gitbuild.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const gate = "python/sglang/srt/layers/gate.py"
	commit := func(msg string, files map[string]string) plumbing.Hash {
		t.Helper()
		ch := map[string][]byte{}
		for k, v := range files {
			ch[k] = []byte(v)
		}
		h, err := b.Commit(msg, ch)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := commit("base", map[string]string{"python/sglang/__init__.py": "", gate: "sm < 90\n"})
	commit("unrelated", map[string]string{"README.md": "x"})
	in := commit("gate excludes 120 (#1)", map[string]string{gate: "sm < 90\nsm == 120\n"})
	commit("unrelated again", map[string]string{"README.md": "y"})
	out := commit("gate reverted (#2)", map[string]string{gate: "sm < 90\n"})
	tip := commit("tip", map[string]string{"docs.md": "z"})
	evals := 0
	eval := func(ctx context.Context, tr source.Tree) ([]string, error) {
		evals++
		data, err := tr.ReadFile(gate)
		if err != nil {
			return nil, err
		}
		return []string{map[bool]string{true: "holds", false: "no"}[!bytes.Contains(data, []byte("== 120"))], "same"}, nil
	}
	h, err := WalkMarkers(context.Background(), b.Repo, source.SGLang, b.URL(), base, tip, []string{gate}, eval)
	if err != nil {
		t.Fatal(err)
	}
	if h.Commits != 5 || h.Evaluated != 2 || evals != 2 {
		t.Errorf("walked %d commits, evaluated %d states (%d calls), want 5 and 2", h.Commits, h.Evaluated, evals)
	}
	if !slices.Equal(h.Start, []string{"holds", "same"}) || !slices.Equal(h.End, []string{"holds", "same"}) {
		t.Errorf("start %v, end %v", h.Start, h.End)
	}
	if len(h.Changes) != 2 || h.Changes[0].Commit != in.String() || h.Changes[0].To != "no" || h.Changes[0].Subject != "gate excludes 120 (#1)" ||
		h.Changes[1].Commit != out.String() || h.Changes[1].To != "holds" || h.Changes[0].Item != 0 {
		t.Errorf("changes %+v", h.Changes)
	}
	states, err := MarkersAt(context.Background(), b.Repo, source.SGLang, b.URL(), []plumbing.Hash{base, in, tip}, eval)
	if err != nil {
		t.Fatal(err)
	}
	if states[0][0] != "holds" || states[1][0] != "no" || states[2][0] != "holds" {
		t.Errorf("states at commits: %v", states)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := WalkMarkers(ctx, b.Repo, source.SGLang, b.URL(), base, tip, []string{gate}, eval); err == nil {
		t.Error("a cancelled walk returned no error")
	}
}

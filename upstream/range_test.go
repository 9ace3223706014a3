package upstream

import (
	"bytes"
	"context"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-git/go-git/v5"

	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
)

func TestRange(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	from, to := fx.commits["v0.6.0"], fx.commits["post"]
	var prog bytes.Buffer
	rs, err := Range(ctx, fx.b.Repo, fx.b.URL(), source.FlashInfer, from, to, [2]string{"v0.6.0", "v0.6.2.post1"}, fx.patches, Options{Progress: &prog})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prog.String(), "planning: 7 of 7 changed states") {
		t.Errorf("progress %q", prog.String())
	}
	if len(rs) != 1 {
		t.Fatalf("%d results", len(rs))
	}
	r := rs[0]
	ri := r.Range
	if r.Status != AlreadyUpstream || ri.Start != Applies || ri.Base != from.String() || ri.Commits != 8 {
		t.Fatalf("status %s, start %s at %s, %d commits", r.Status, ri.Start, ri.Base, ri.Commits)
	}
	type step struct {
		commit   string
		from, to Status
	}
	var got []step
	for _, c := range ri.Changes {
		name := ""
		for n, h := range fx.commits {
			if h.String() == c.Commit {
				name = n
			}
		}
		got = append(got, step{name, c.From, c.To})
	}
	want := []step{{"fuzzy", Applies, Fuzzy}, {"conflict", Fuzzy, Conflict}, {"adopt", Conflict, AlreadyUpstream}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %+v, want %+v", got, want)
	}
	last := ri.Changes[2]
	if last.Subject != "feat(comm): extend trtllm_allreduce to SM12x (#3903)" || last.Date.IsZero() {
		t.Errorf("adopting change: %+v", last)
	}
	// Only commits that touch comm.py or version.txt are planned: the base,
	// drift, rc, fuzzy, conflict, adopt, post (not the two docs commits).
	if ri.Planned != 7 {
		t.Errorf("planned %d commits, want 7", ri.Planned)
	}
}

// A range whose start is not on the end's first-parent line starts from
// where the two histories meet.
func TestRangeFromSideBranch(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	rs, err := Range(ctx, fx.b.Repo, fx.b.URL(), source.FlashInfer, fx.commits["post"], fx.commits["v0.6.0"], [2]string{"post", "v0.6.0"}, fx.patches, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ri := rs[0].Range; ri.Commits != 0 || len(ri.Changes) != 0 || ri.Base != fx.commits["v0.6.0"].String() || rs[0].Status != Applies {
		t.Fatalf("reverse range: %+v %+v", rs[0], ri)
	}
}

func TestWatchedPaths(t *testing.T) {
	fx := newFixture(t)
	got := watchedPaths(fx.patches[0], source.FlashInfer)
	want := []string{"flashinfer/jit/comm.py", "flashinfer/version.py", "flashinfer/version.txt", "version.txt"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("watchedPaths = %v, want %v", got, want)
	}
}

// A walk reading through a repository handle of its own (loose objects:
// its workers' reads take turns) finds the same changes.
func TestRangeOwnHandle(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	opts := Options{reopen: func() (*git.Repository, error) { return gitrepo.OpenStore(fx.b.Dir) }}
	rs, err := Range(ctx, fx.b.Repo, fx.b.URL(), source.FlashInfer, fx.commits["v0.6.0"], fx.commits["post"], [2]string{"a", "b"}, fx.patches, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range rs[0].Range.Changes {
		got = append(got, string(c.To))
	}
	if want := []string{"fuzzy", "conflict", "already-upstream"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
}

// On a repository whose objects are packed, the workers share one handle
// reading the packs: one more handle is opened for the whole walk, not one
// per worker (each go-git handle loads its own copy of the pack index and a
// map from every pack offset to its object), and the changes are the same.
func TestRangePackedOneHandle(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t)
	want, err := Range(ctx, fx.b.Repo, fx.b.URL(), source.FlashInfer, fx.commits["v0.6.0"], fx.commits["post"], [2]string{"a", "b"}, fx.patches, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.b.Repo.RepackObjects(&git.RepackConfig{}); err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	var opened atomic.Int32
	opts := Options{reopen: func() (*git.Repository, error) {
		opened.Add(1)
		return gitrepo.OpenStore(fx.b.Dir)
	}}
	got, err := Range(ctx, fx.b.Repo, fx.b.URL(), source.FlashInfer, fx.commits["v0.6.0"], fx.commits["post"], [2]string{"a", "b"}, fx.patches, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := opened.Load(); n > 1 {
		t.Errorf("%d repository handles opened for 4 workers, want at most 1", n)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("packed: %+v\nloose: %+v", got[0].Range, want[0].Range)
	}
}

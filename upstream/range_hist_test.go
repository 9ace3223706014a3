package upstream

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/smpatch/smpatch/internal/testkit/gitbuild/checkhist"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
)

// genHistory writes a checkhist history and clones it into a repository
// cache, as `smpatch check --upstream` does (so its objects are packed,
// with delta chains, as a fetch leaves them).
func genHistory(tb testing.TB, o checkhist.Options) (*gitrepo.Upstream, Target, []*patches.Patch, checkhist.Info) {
	tb.Helper()
	dir := tb.TempDir()
	info, err := checkhist.Generate(filepath.Join(dir, "gen"), o)
	if err != nil {
		tb.Fatal(err)
	}
	ps, err := catalog.LoadFS(os.DirFS(info.Catalog), info.Catalog, info.Catalog)
	if err != nil {
		tb.Fatal(err)
	}
	rc, err := gitrepo.NewRepoCache(filepath.Join(dir, "cache"))
	if err != nil {
		tb.Fatal(err)
	}
	u, err := rc.Open(context.Background(), info.URL)
	if err != nil {
		tb.Fatal(err)
	}
	return u, Target{Project: source.FlashInfer, URL: info.URL, Ref: info.Last}, ps, info
}

// The range walk (memos, listings per tree hash, contents read straight
// from the packs, parallel workers) reports what planning every commit on
// its own, through go-git and without any memo, finds: the same status at
// the start, the same changes with the same details, the same result at
// the end.
func TestRangeMatchesPlainPlanning(t *testing.T) {
	for _, o := range []checkhist.Options{
		{Commits: 100, Size: 12_000, Touch: 60, Seed: 3, Fuzzy: true, PostEvery: 7},
		{Commits: 100, Size: 12_000, Touch: 10, Seed: 4, PostEvery: 3},
	} {
		ctx := context.Background()
		u, tg, ps, _ := genHistory(t, o)
		for _, strict := range []bool{false, true} {
			rs, err := CheckUpstream(ctx, u, tg, [2]string{"v0.6.0", ""}, ps, Options{Strict: strict})
			if err != nil {
				t.Fatal(err)
			}
			from, err := u.Resolve(ctx, "v0.6.0")
			if err != nil {
				t.Fatal(err)
			}
			to, err := u.Resolve(ctx, tg.Ref)
			if err != nil {
				t.Fatal(err)
			}
			chain, base, err := firstParentChain(ctx, u.Repo, from, to)
			if err != nil {
				t.Fatal(err)
			}
			plain := func(h plumbing.Hash) Result {
				tr, err := gitrepo.OpenRevision(u.Repo, h, tg.Project, tg.URL)
				if err != nil {
					t.Fatal(err)
				}
				return CheckTree(ctx, tr, ps, Options{Strict: strict})[0]
			}
			start := plain(base)
			want := &RangeInfo{From: "v0.6.0", To: tg.Ref, Base: base.String(), Start: start.Status, Changes: []Change{}, Commits: len(chain)}
			cur := start
			// The variant windows, each commit planned on its own: a new
			// window where the variant, or whether it resolves, changes.
			window := func(h plumbing.Hash, r Result) {
				st := r.Status
				if st == Applies || st == Fuzzy || st == AlreadyUpstream {
					st = ""
				}
				if n := len(want.Variants); n > 0 && want.Variants[n-1].Variant == r.Variant && want.Variants[n-1].Status == st {
					want.Variants[n-1].Last, want.Variants[n-1].LastVersion = h.String(), r.Version
					want.Variants[n-1].Commits++
					return
				}
				want.Variants = append(want.Variants, VariantWindow{Variant: r.Variant, Status: st, First: h.String(), Last: h.String(), Commits: 1, FirstVersion: r.Version, LastVersion: r.Version})
			}
			want.Variants = []VariantWindow{}
			window(base, start)
			for _, c := range chain {
				r := plain(c.Hash)
				window(c.Hash, r)
				if r.Status != cur.Status {
					want.Changes = append(want.Changes, Change{Commit: c.Hash.String(), Date: c.Committer.When.UTC(), Subject: subject(c.Message), From: cur.Status, To: r.Status, Detail: r.Detail})
				}
				cur = r
			}
			got := rs[0]
			want.Planned = got.Range.Planned
			if min := map[bool]int{true: 4, false: 2}[o.Fuzzy]; len(want.Changes) < min {
				t.Fatalf("%+v: the history shows %d status changes, want at least %d", o, len(want.Changes), min)
			}
			if !reflect.DeepEqual(got.Range, want) {
				t.Errorf("%+v strict=%v: range walk\n%+v\nplain planning\n%+v", o, strict, got.Range, want)
			}
			got.Range, got.Ref = nil, ""
			cur.Revision, cur.Commit = tg.URL+"@"+to.String(), to.String()
			if !reflect.DeepEqual(got, cur) {
				t.Errorf("%+v strict=%v: result at the end\n%+v\nplain planning\n%+v", o, strict, got, cur)
			}
		}
	}
}

// BenchmarkRangeTouch60 is the warm walk of bench/check.bench.sh's stress
// case in process: 500 commits, the 250 KB target changed in 60% of them.
// Profile it with -cpuprofile.
func BenchmarkRangeTouch60(b *testing.B) {
	u, tg, ps, _ := genHistory(b, checkhist.Options{Commits: 500, Touch: 60, Seed: 1})
	ctx := context.Background()
	// CPU time beside wall time: the machine may be shared.
	cpu0 := cpuTime()
	n := 0
	defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Milliseconds())/float64(n), "cpu-ms/op") }()
	for b.Loop() {
		n++
		rs, err := CheckUpstream(ctx, u, tg, [2]string{"v0.6.0", ""}, ps, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(rs[0].Range.Changes) != 2 {
			b.Fatalf("changes %+v", rs[0].Range.Changes)
		}
	}
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

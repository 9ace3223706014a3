package upstream

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
)

// MarkerEval reads one revision of the tree and returns one state per
// item it decides (a rule's "holds", say). It is called from several
// goroutines at once, each with its own tree.
type MarkerEval func(ctx context.Context, t source.Tree) ([]string, error)

// MarkerChange is a commit where an item's state changed.
type MarkerChange struct {
	Item    int       `json:"item"`
	Commit  string    `json:"commit"`
	Date    time.Time `json:"date"`
	Subject string    `json:"subject"`
	From    string    `json:"from"`
	To      string    `json:"to"`
}

// MarkerHistory is the states of a set of items over a first-parent walk.
type MarkerHistory struct {
	Base      string         `json:"base"` // the commit the walk starts from
	BaseDate  time.Time      `json:"base_date"`
	Tip       string         `json:"tip"`
	TipDate   time.Time      `json:"tip_date"`
	Start     []string       `json:"start"`   // states at Base
	End       []string       `json:"end"`     // states at the tip
	Changes   []MarkerChange `json:"changes"` // oldest first
	Commits   int            `json:"commits"` // commits walked after Base
	Evaluated int            `json:"evaluated"`
}

// WalkMarkers walks the first-parent history from where to's line meets
// from's up to to, as Range does, and evaluates the items wherever the
// blobs of paths (files or directories of the tree) differ from the
// commit before: commits that change none of them keep their parent's
// states without being read. Distinct states are evaluated in parallel,
// through one handle reading the packs.
func WalkMarkers(ctx context.Context, repo *git.Repository, p source.Project, url string, from, to plumbing.Hash, paths []string, eval MarkerEval) (*MarkerHistory, error) {
	if os.Getenv("GOMEMLIMIT") == "" {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(rangeMemoryLimit))
	}
	cache := gitrepo.NewRevisionCache(16 << 20)
	defer cache.Close()
	shared := cache.ReadPacks(repo)
	if shared != nil {
		repo = shared
	}
	chain, base, err := firstParentChain(ctx, repo, from, to)
	if err != nil {
		return nil, err
	}
	baseCommit, err := repo.CommitObject(base)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", base, err)
	}
	commits := append([]*object.Commit{lean(baseCommit)}, chain...)
	watched := slices.Clone(paths)
	sort.Strings(watched)
	watched = slices.Compact(watched)
	idx := map[string]int{}
	for i, w := range watched {
		idx[w] = i
	}
	walker := &entryWalker{repo: repo, memo: map[memoKey][]plumbing.Hash{}, trie: buildTrie(watched), idx: map[*trie][]int{}}
	keys := make([]string, len(commits))
	first := map[string]*object.Commit{} // key → the first commit with it
	var order []string
	for n, c := range commits {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		hs, err := walker.hashes(c)
		if err != nil {
			return nil, err
		}
		k := keyOf(hs, idx, watched, "")
		keys[n] = k
		if _, ok := first[k]; !ok {
			first[k] = c
			order = append(order, k)
		}
	}
	states, err := evalKeys(ctx, repo, shared != nil, cache, p, url, order, first, eval)
	if err != nil {
		return nil, err
	}
	tip := commits[len(commits)-1]
	h := &MarkerHistory{Base: base.String(), BaseDate: baseCommit.Committer.When.UTC(), Tip: tip.Hash.String(), TipDate: tip.Committer.When.UTC(),
		Start: states[keys[0]], End: states[keys[len(keys)-1]], Changes: []MarkerChange{}, Commits: len(chain), Evaluated: len(order)}
	for n := 1; n < len(commits); n++ {
		if keys[n] == keys[n-1] {
			continue
		}
		prev, cur := states[keys[n-1]], states[keys[n]]
		for i := range cur {
			if i < len(prev) && prev[i] != cur[i] {
				c := commits[n]
				h.Changes = append(h.Changes, MarkerChange{Item: i, Commit: c.Hash.String(), Date: c.Committer.When.UTC(), Subject: subject(c.Message), From: prev[i], To: cur[i]})
			}
		}
	}
	return h, nil
}

// MarkersAt evaluates the items at each of the commits.
func MarkersAt(ctx context.Context, repo *git.Repository, p source.Project, url string, commits []plumbing.Hash, eval MarkerEval) ([][]string, error) {
	cache := gitrepo.NewRevisionCache(16 << 20)
	defer cache.Close()
	shared := cache.ReadPacks(repo)
	if shared != nil {
		repo = shared
	}
	first := map[string]*object.Commit{}
	var order []string
	for _, h := range commits {
		c, err := repo.CommitObject(h)
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", h, err)
		}
		k := h.String()
		if _, ok := first[k]; !ok {
			first[k] = lean(c)
			order = append(order, k)
		}
	}
	states, err := evalKeys(ctx, repo, shared != nil, cache, p, url, order, first, eval)
	if err != nil {
		return nil, err
	}
	out := make([][]string, len(commits))
	for i, h := range commits {
		out[i] = states[h.String()]
	}
	return out, nil
}

// evalKeys evaluates the first commit of each key, in parallel when the
// repository handle is safe for it.
func evalKeys(ctx context.Context, repo *git.Repository, shared bool, cache *gitrepo.RevisionCache, p source.Project, url string, order []string, first map[string]*object.Commit, eval MarkerEval) (map[string][]string, error) {
	states := make(map[string][]string, len(order))
	var mu, storeMu sync.Mutex
	var firstErr error
	workers := 1
	if shared {
		workers = max(1, min(runtime.GOMAXPROCS(0), len(order)))
	}
	var wg sync.WaitGroup
	for w := range workers {
		chunk := slices.Clone(order[w*len(order)/workers : (w+1)*len(order)/workers])
		slices.Reverse(chunk) // newest first: each read is one delta on the last
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, k := range chunk {
				if ctx.Err() != nil {
					return
				}
				var t source.Tree
				if !shared {
					storeMu.Lock()
				}
				rt, err := gitrepo.OpenRevisionOf(repo, first[k], p, url)
				if err == nil {
					rt.SetCache(cache)
					t = rt
				}
				var st []string
				if err == nil {
					st, err = eval(ctx, t)
				}
				if !shared {
					storeMu.Unlock()
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("commit %s: %w", first[k].Hash, err)
				}
				states[k] = st
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return states, ctx.Err()
}

package upstream

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
)

// rangeMemoryLimit is the soft memory limit of a range walk: what it keeps
// (file contents and listings, go-git's object caches and pack indexes) is
// about 100 MB on sglang's history; the binary's own pages come on top.
const rangeMemoryLimit = 140 << 20

// RangeInfo is a patch's history over a range of commits.
type RangeInfo struct {
	From    string   `json:"from"` // the range as given
	To      string   `json:"to"`
	Base    string   `json:"base"`    // the commit the walk starts from
	Start   Status   `json:"start"`   // status at Base
	Changes []Change `json:"changes"` // oldest first
	Commits int      `json:"commits"` // commits walked
	Planned int      `json:"planned"` // commits where the targets changed and a plan ran
	// Variants are the runs of commits over which one variant was chosen
	// (none when no variant resolved), oldest first: where each variant
	// of the patch holds on this history.
	Variants []VariantWindow `json:"variants"`
}

// VariantWindow is a run of consecutive first-parent commits of a walk on
// which a patch resolved with one variant ("" for none).
type VariantWindow struct {
	Variant string `json:"variant"`
	// Status is the status over the run when the variant does not
	// resolve there (conflict, refused, ...); "" when it does.
	Status  Status `json:"status,omitempty"`
	First   string `json:"first"` // the oldest commit of the run (the walk's base for the first run)
	Last    string `json:"last"`  // the newest
	Commits int    `json:"commits"`
	// Versions are the tree's versions at First and Last ("" when unknown).
	FirstVersion string `json:"first_version,omitempty"`
	LastVersion  string `json:"last_version,omitempty"`
}

// Change is a commit where a patch's status changed.
type Change struct {
	Commit  string    `json:"commit"`
	Date    time.Time `json:"date"`
	Subject string    `json:"subject"`
	From    Status    `json:"from"`
	To      Status    `json:"to"`
	Detail  string    `json:"detail,omitempty"`
}

// Range walks the first-parent history from the commit where to's history
// meets from's (from itself when it is an ancestor) up to to, and reports for
// every patch its status at the start, at to, and each commit where it
// changed. A commit is planned only when the blobs of the patch's target
// files (or its search directories, or the version files) differ from its
// parent's; the trees are compared entry by entry from the root, so
// unchanged directories are never read. Blobs are read from the object
// store: no work tree.
func Range(ctx context.Context, repo *git.Repository, url string, p source.Project, from, to plumbing.Hash, rng [2]string, ps []*patches.Patch, opts Options) ([]Result, error) {
	// A walk inflates thousands of blobs: collect garbage before the heap
	// doubles past what is kept, unless the user chose a limit.
	if os.Getenv("GOMEMLIMIT") == "" {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(rangeMemoryLimit))
	}
	// Every object is read through one handle reading the packs, which the
	// planning workers share: one pack index in memory, whatever the number
	// of workers, and caches of fixed sizes. It reads through a handle of
	// its own when opts.reopen makes one, so that what the caller's handle
	// loaded to resolve the range (go-git's copy of the pack index, and its
	// map from every pack offset to a hash, 90 bytes an object in all) can
	// be collected.
	cache := gitrepo.NewRevisionCache(16 << 20)
	defer cache.Close()
	under := repo
	if opts.reopen != nil {
		if r, err := opts.reopen(); err == nil {
			under = r
		}
	}
	shared := cache.ReadPacks(under)
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
	tags, err := gitrepo.VersionTags(repo)
	if err != nil {
		return nil, err
	}
	commits := append([]*object.Commit{lean(baseCommit)}, chain...)
	hints, err := tagHints(ctx, repo, commits, tags)
	if err != nil {
		return nil, err
	}
	w := newRangeWalk(repo, p, ps, commits, hints)
	if err := w.readKeys(ctx, opts.Progress); err != nil {
		return nil, err
	}
	// Pass 2: plan the jobs in parallel, for the status only (a conflict
	// is not explained: most states are never shown).
	pl := &rangePlanner{repo: repo, shared: shared != nil, url: url, project: p, ps: ps, opts: opts, cache: cache, memo: patches.NewMemo(), hints: hints, jobAt: w.jobAt}
	brief, err := pl.plan(ctx, w.jobs, true)
	if err != nil {
		return nil, err
	}
	// Pass 3: the states shown (where a status changes, and the last) are
	// planned again in full, for their details.
	full, err := pl.plan(ctx, w.shown(brief), false)
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(ps))
	for i := range ps {
		out[i] = w.result(i, brief[i], full[i], RangeInfo{From: rng[0], To: rng[1], Base: base.String(), Commits: len(chain)})
		out[i].Commit = to.String()
		out[i].Revision = url + "@" + to.String()
	}
	return out, nil
}

// rangeWalk is what pass 1 of a range walk learns: the key of every patch
// at every commit, and the states to plan.
type rangeWalk struct {
	trees   *entryWalker
	idx     map[string]int // watched path → index in the walker's hashes
	keys    [][]string     // per patch, its watched paths
	ps      []*patches.Patch
	commits []*object.Commit // the base, then the chain
	hints   []tagHint

	keyAt [][]string // per commit, per patch
	jobs  []job      // one per patch and distinct key, in commit order
	jobAt map[*object.Commit]int
	seen  []map[string]bool // per patch, the keys with a job
}

func newRangeWalk(repo *git.Repository, p source.Project, ps []*patches.Patch, commits []*object.Commit, hints []tagHint) *rangeWalk {
	// One trie of every path any patch looks at.
	keys := make([][]string, len(ps))
	all := map[string]bool{}
	for i, pt := range ps {
		keys[i] = watchedPaths(pt, p)
		for _, k := range keys[i] {
			all[k] = true
		}
	}
	paths := slices.Sorted(maps.Keys(all))
	idx := map[string]int{}
	for i, k := range paths {
		idx[k] = i
	}
	w := &rangeWalk{
		trees: &entryWalker{repo: repo, memo: map[memoKey][]plumbing.Hash{}, trie: buildTrie(paths), idx: map[*trie][]int{}},
		idx:   idx, keys: keys, ps: ps, commits: commits, hints: hints,
		keyAt: make([][]string, len(commits)), jobAt: map[*object.Commit]int{}, seen: make([]map[string]bool, len(ps)),
	}
	for i := range ps {
		w.seen[i] = map[string]bool{}
	}
	return w
}

// readKeys is pass 1: the key of every patch at every commit (tree entries
// only), and one plan job per patch and distinct key.
func (w *rangeWalk) readKeys(ctx context.Context, prog io.Writer) error {
	for n, c := range w.commits {
		if n%64 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			progress(prog, "reading trees: commit %d of %d", n, len(w.commits))
		}
		// The version a tag gives, not its distance: a plan depends on the
		// version only.
		tag := w.hints[n].name
		hashes, err := w.trees.hashes(c)
		if err != nil {
			return err
		}
		w.keyAt[n] = make([]string, len(w.ps))
		for i := range w.ps {
			k := keyOf(hashes, w.idx, w.keys[i], tag)
			if n > 0 && k == w.keyAt[n-1][i] {
				k = w.keyAt[n-1][i] // one copy for a run of commits
			}
			w.keyAt[n][i] = k
			if !w.seen[i][k] && (n == 0 || k != w.keyAt[n-1][i]) {
				w.seen[i][k] = true
				w.jobAt[c] = n
				w.jobs = append(w.jobs, job{i, c, k})
			}
		}
	}
	return nil
}

// shown lists the states that are shown, from the statuses of pass 2:
// every state where a patch's status changes, and its last.
func (w *rangeWalk) shown(brief []map[string]Result) []job {
	var again []job
	for i := range w.ps {
		shown := map[string]bool{}
		show := func(n int) {
			if k := w.keyAt[n][i]; !shown[k] {
				shown[k] = true
				again = append(again, job{i, w.commits[n], k})
			}
		}
		cur := brief[i][w.keyAt[0][i]].Status
		last := 0
		for n := 1; n < len(w.commits); n++ {
			if w.keyAt[n][i] == w.keyAt[n-1][i] {
				continue
			}
			last = n
			if r := brief[i][w.keyAt[n][i]]; r.Status != cur {
				show(n)
				cur = r.Status
			}
		}
		show(last)
	}
	return again
}

// result is patch i's result: its status at the last commit, in full, with
// its history over the walk in ri.
func (w *rangeWalk) result(i int, brief, full map[string]Result, ri RangeInfo) Result {
	start := brief[w.keyAt[0][i]]
	ri.Start, ri.Changes, ri.Planned = start.Status, []Change{}, len(w.seen[i])
	ri.Variants = []VariantWindow{}
	at := func(n int) Result {
		if r, ok := full[w.keyAt[n][i]]; ok {
			return r
		}
		return brief[w.keyAt[n][i]]
	}
	for n := range w.commits {
		r := at(n)
		st := r.Status
		if st == Applies || st == Fuzzy || st == AlreadyUpstream {
			st = ""
		}
		if m := len(ri.Variants); m > 0 && ri.Variants[m-1].Variant == r.Variant && ri.Variants[m-1].Status == st {
			vw := &ri.Variants[m-1]
			vw.Last, vw.LastVersion = w.commits[n].Hash.String(), r.Version
			vw.Commits++
			continue
		}
		h := w.commits[n].Hash.String()
		ri.Variants = append(ri.Variants, VariantWindow{Variant: r.Variant, Status: st, First: h, Last: h, Commits: 1, FirstVersion: r.Version, LastVersion: r.Version})
	}
	cur, last := start, w.keyAt[0][i]
	for n := 1; n < len(w.commits); n++ {
		k := w.keyAt[n][i]
		if k == w.keyAt[n-1][i] {
			continue
		}
		last = k
		r := at(n)
		if r.Status != cur.Status {
			c := w.commits[n]
			ri.Changes = append(ri.Changes, Change{
				Commit: c.Hash.String(), Date: c.Committer.When.UTC(), Subject: subject(c.Message),
				From: cur.Status, To: r.Status, Detail: r.Detail,
			})
		}
		cur = r
	}
	out := full[last]
	out.Range = &ri
	return out
}

// job is one state to plan: patch i on commit c, whose watched paths' blobs
// (and version) make key.
type job struct {
	i   int
	c   *object.Commit
	key string
}

// rangePlanner plans the states of a range walk.
type rangePlanner struct {
	repo    *git.Repository
	shared  bool // repo is safe for concurrent use
	url     string
	project source.Project
	ps      []*patches.Patch
	opts    Options
	cache   *gitrepo.RevisionCache
	memo    *patches.Memo
	hints   []tagHint
	jobAt   map[*object.Commit]int
}

// plan plans jobs in parallel and returns, per patch, the result per key.
// The workers share a handle that reads the packs (ReadPacks); go-git's own
// storage is not safe for concurrent use, so without packs their reads
// from the store take turns. brief plans for the status only.
func (pl *rangePlanner) plan(ctx context.Context, jobs []job, brief bool) ([]map[string]Result, error) {
	results := make([]map[string]Result, len(pl.ps))
	for i := range pl.ps {
		results[i] = map[string]Result{}
	}
	var mu, storeMu sync.Mutex
	var firstErr error
	var done int
	// Each worker takes a contiguous run of jobs, newest first: a file's
	// revisions share a delta chain, which git starts from the newest
	// revision (the largest, for a file that grows), so each revision read
	// is one delta on the one read just before.
	workers := max(1, min(runtime.GOMAXPROCS(0), len(jobs)))
	var wg sync.WaitGroup
	for w := range workers {
		chunk := slices.Clone(jobs[w*len(jobs)/workers : (w+1)*len(jobs)/workers])
		slices.Reverse(chunk)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, j := range chunk {
				if ctx.Err() != nil {
					return
				}
				r, err := pl.planOne(ctx, j, brief, &storeMu)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				results[j.i][j.key] = r
				done++
				if brief && (done%8 == 0 || done == len(jobs)) {
					progress(pl.opts.Progress, "planning: %d of %d changed states", done, len(jobs))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if pl.opts.Progress != nil && brief {
		fmt.Fprint(pl.opts.Progress, "\r\033[K")
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return results, ctx.Err()
}

// planOne plans job j; storeMu serialises reads from a store that is not
// safe for concurrent use.
func (pl *rangePlanner) planOne(ctx context.Context, j job, brief bool, storeMu *sync.Mutex) (Result, error) {
	lock := func() {}
	unlock := lock
	if !pl.shared {
		lock, unlock = storeMu.Lock, storeMu.Unlock
	}
	lock()
	rt, err := gitrepo.OpenRevisionOf(pl.repo, j.c, pl.project, pl.url)
	unlock()
	if err != nil {
		return Result{}, err
	}
	rt.SetCache(pl.cache)
	rt.SetNearestTag(pl.hints[pl.jobAt[j.c]].hint)
	o := pl.opts
	o.brief = brief
	var t source.Tree = rt
	if !pl.shared {
		t = &lockedTree{Tree: rt, rt: rt, mu: storeMu}
	}
	r := checkOne(ctx, t, pl.ps[j.i], o, pl.memo)
	r.Commit = j.c.Hash.String()
	return r, nil
}

// progress overwrites the current terminal line.
func progress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "\r\033[K"+format, args...)
	}
}

// lockedTree serialises a tree's reads from the object store.
type lockedTree struct {
	source.Tree
	rt *gitrepo.RevisionTree
	mu *sync.Mutex
}

func (t *lockedTree) FileHash(rel string) (patches.BlobHash, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rt.FileHash(rel)
}

func (t *lockedTree) Version(ctx context.Context) (*version.Version, string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Tree.Version(ctx)
}

func (t *lockedTree) ReadFile(rel string) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Tree.ReadFile(rel)
}

func (t *lockedTree) ListFiles(dir string) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Tree.ListFiles(dir)
}

// lean is what a walk keeps of each of its commits: the hashes, the
// committer and the message's first line; not the rest of the message, a
// signature, nor the bytes it was decoded from.
func lean(c *object.Commit) *object.Commit {
	return &object.Commit{Hash: c.Hash, Committer: c.Committer, Message: subject(c.Message), TreeHash: c.TreeHash, ParentHashes: c.ParentHashes}
}

// subject is a commit message's first line.
func subject(msg string) string {
	s, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	return strings.TrimSpace(s)
}

// watchedPaths are the paths whose blobs decide a patch's plan: the target
// files of every variant, their search directories and the version files.
func watchedPaths(pt *patches.Patch, p source.Project) []string {
	set := map[string]bool{}
	// The patches it needs are planned first, the verify rules read their
	// files, and uncovered shapes are recognised by their markers.
	for _, q := range append(pt.Needed(), pt) {
		for _, r := range q.Verify {
			set[r.File] = true
		}
		for _, u := range q.Uncovered {
			if u.File != "" {
				set[u.File] = true
			}
		}
	}
	for _, v := range allVariants(pt) {
		for _, fd := range v.Files {
			if fd.OldPath != "" {
				set[fd.OldPath] = true
			}
			if fd.NewPath != "" {
				set[fd.NewPath] = true
			}
		}
		for _, d := range v.Search {
			set[strings.Trim(path.Clean(d), "/")] = true
		}
	}
	for _, f := range source.VersionFiles(p) {
		set[f] = true
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// allVariants is every variant of pt and of the patches it needs.
func allVariants(pt *patches.Patch) []*patches.Variant {
	var out []*patches.Variant
	for _, q := range append(pt.Needed(), pt) {
		out = append(out, q.Variants...)
	}
	return out
}

func keyOf(hashes []plumbing.Hash, idx map[string]int, paths []string, tag string) string {
	var b strings.Builder
	for _, p := range paths {
		h := hashes[idx[p]]
		b.Write(h[:])
	}
	b.WriteString(tag)
	return b.String()
}

// firstParentChain lists the commits from base (exclusive) to to
// (inclusive), oldest first, following first parents from to; base is the
// first commit on that line that from's history contains.
func firstParentChain(ctx context.Context, repo *git.Repository, from, to plumbing.Hash) ([]*object.Commit, plumbing.Hash, error) {
	// Usually from is on to's first-parent line: walk back to it, and no
	// further than a day before its commit time.
	if fc, err := repo.CommitObject(from); err == nil {
		limit := fc.Committer.When.Add(-24 * time.Hour)
		var chain []*object.Commit
		h := to
		for h != from {
			if err := ctx.Err(); err != nil {
				return nil, plumbing.ZeroHash, err
			}
			c, err := repo.CommitObject(h)
			if err != nil {
				return nil, plumbing.ZeroHash, fmt.Errorf("commit %s: %w", h, err)
			}
			if len(c.ParentHashes) == 0 || c.Committer.When.Before(limit) {
				chain = nil
				break
			}
			chain = append(chain, lean(c))
			h = c.ParentHashes[0]
		}
		if h == from {
			slices.Reverse(chain)
			return chain, from, nil
		}
	}
	anc, err := ancestors(ctx, repo, from)
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	var chain []*object.Commit
	h := to
	for {
		if anc[h] {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, plumbing.ZeroHash, err
		}
		c, err := repo.CommitObject(h)
		if err != nil {
			return nil, plumbing.ZeroHash, fmt.Errorf("commit %s: %w", h, err)
		}
		if len(c.ParentHashes) == 0 {
			// from and to share no history: start from the root commit.
			break
		}
		chain = append(chain, lean(c))
		h = c.ParentHashes[0]
	}
	slices.Reverse(chain)
	return chain, h, nil
}

// ancestors is the set of commits reachable from h, h included.
func ancestors(ctx context.Context, repo *git.Repository, h plumbing.Hash) (map[plumbing.Hash]bool, error) {
	seen := map[plumbing.Hash]bool{h: true}
	stack := []plumbing.Hash{h}
	for len(stack) > 0 {
		if len(seen)%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		co, err := repo.CommitObject(c)
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", c, err)
		}
		for _, p := range co.ParentHashes {
			if !seen[p] {
				seen[p] = true
				stack = append(stack, p)
			}
		}
	}
	return seen, nil
}

// tagHint is the nearest version tag of one commit of the walk.
type tagHint struct {
	name string // "" when none is within source.MaxTagDistance
	hint *gitrepo.TagHint
}

// tagHints works out, for every commit of a first-parent chain (oldest
// first), what gitrepo.NearestVersionTag would find, without a history walk
// per commit: the nearest tag of a commit is the nearest of its parents'
// plus one step (the chain's previous commit is its first parent; other
// parents, merges, are walked).
func tagHints(ctx context.Context, repo *git.Repository, commits []*object.Commit, tags map[plumbing.Hash][]string) ([]tagHint, error) {
	type near struct {
		name string
		dist int
	}
	walk := func(h plumbing.Hash) (near, error) {
		name, _, dist, err := gitrepo.NearestVersionTag(ctx, repo, h)
		return near{name, dist}, err
	}
	better := func(a, b near) near { // the nearer, the higher version on a tie
		switch {
		case a.name == "":
			return b
		case b.name == "" || a.dist < b.dist:
			return a
		case b.dist < a.dist:
			return b
		}
		av, _ := source.ParseVersion(a.name)
		bv, _ := source.ParseVersion(b.name)
		if source.ComparePEP440(bv, av) > 0 {
			return b
		}
		return a
	}
	out := make([]tagHint, len(commits))
	var prev near
	for n, c := range commits {
		var cur near
		var err error
		if ts := tags[c.Hash]; len(ts) > 0 {
			for _, t := range ts {
				cur = better(cur, near{t, 0})
			}
		} else if n == 0 {
			if cur, err = walk(c.Hash); err != nil {
				return nil, err
			}
		} else {
			for k, ph := range c.ParentHashes {
				p := prev
				if k > 0 {
					if p, err = walk(ph); err != nil {
						return nil, err
					}
				}
				if p.name != "" {
					cur = better(cur, near{p.name, p.dist + 1})
				}
			}
			if cur.dist > source.MaxTagDistance {
				cur = near{}
			}
		}
		out[n] = tagHint{name: cur.name, hint: gitrepo.NewTagHint(cur.name, cur.dist)}
		prev = cur
	}
	return out, nil
}

// trie is a set of paths as a tree of names; each watched path has an index.
type trie struct {
	children map[string]*trie
	names    []string // sorted child names
	index    int      // index of the path ending here, -1 if none
}

func buildTrie(paths []string) *trie {
	root := &trie{children: map[string]*trie{}, index: -1}
	for i, p := range paths {
		n := root
		for _, part := range strings.Split(p, "/") {
			c, ok := n.children[part]
			if !ok {
				c = &trie{children: map[string]*trie{}, index: -1}
				n.children[part] = c
				n.names = append(n.names, part)
			}
			n = c
		}
		n.index = i
	}
	var sortAll func(*trie)
	sortAll = func(n *trie) {
		sort.Strings(n.names)
		for _, c := range n.children {
			sortAll(c)
		}
	}
	sortAll(root)
	return root
}

type memoKey struct {
	tree plumbing.Hash
	node *trie
}

// entryWalker finds the object hashes of the watched paths in a commit's
// tree, remembering the answer per (tree, trie node): a directory whose tree
// hash did not change since the commit before is not read again. Only the
// answers of the current and the previous commit are kept, whatever the
// length of the walk.
type entryWalker struct {
	repo *git.Repository
	trie *trie
	memo map[memoKey][]plumbing.Hash // this commit's
	last map[memoKey][]plumbing.Hash // the previous commit's
	idx  map[*trie][]int
	n    int
}

func (w *entryWalker) hashes(c *object.Commit) ([]plumbing.Hash, error) {
	w.last, w.memo = w.memo, make(map[memoKey][]plumbing.Hash, len(w.memo))
	out := make([]plumbing.Hash, w.count())
	return out, w.fill(c.TreeHash, w.trie, out)
}

func (w *entryWalker) count() int {
	if w.n == 0 {
		var walk func(*trie)
		walk = func(t *trie) {
			if t.index >= 0 {
				w.n++
			}
			for _, c := range t.children {
				walk(c)
			}
		}
		walk(w.trie)
	}
	return w.n
}

// fill writes the hashes of node's paths under tree into out. The memo
// stores, per (tree, node), the hashes in the order of collectIdx(node).
func (w *entryWalker) fill(tree plumbing.Hash, node *trie, out []plumbing.Hash) error {
	k := memoKey{tree, node}
	idx := w.collectIdx(node)
	hs, ok := w.memo[k]
	if !ok {
		if hs, ok = w.last[k]; ok {
			w.memo[k] = hs
		}
	}
	if ok {
		for i, j := range idx {
			out[j] = hs[i]
		}
		return nil
	}
	t, err := w.repo.TreeObject(tree)
	if err != nil {
		return fmt.Errorf("tree %s: %w", tree, err)
	}
	for _, name := range node.names {
		child := node.children[name]
		e, err := t.FindEntry(name)
		if err != nil {
			continue // absent: zero hashes
		}
		if child.index >= 0 {
			out[child.index] = e.Hash
		}
		if len(child.names) > 0 && e.Mode == filemode.Dir {
			if err := w.fill(e.Hash, child, out); err != nil {
				return err
			}
		}
	}
	hs = make([]plumbing.Hash, len(idx))
	for i, j := range idx {
		hs[i] = out[j]
	}
	w.memo[k] = hs
	return nil
}

// collectIdx lists the path indexes under node, node's own first.
func (w *entryWalker) collectIdx(node *trie) []int {
	if v, ok := w.idx[node]; ok {
		return v
	}
	var out []int
	var walk func(*trie)
	walk = func(t *trie) {
		if t.index >= 0 {
			out = append(out, t.index)
		}
		for _, n := range t.names {
			walk(t.children[n])
		}
	}
	walk(node)
	w.idx[node] = out
	return out
}

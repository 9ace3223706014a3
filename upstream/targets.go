package upstream

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
)

// CheckUpstream checks ps on the cached upstream repository u of target t:
// on t.Ref, or, when rng[0] is set, on every first-parent commit from
// rng[0] to rng[1] (t.Ref when empty). The error says why nothing could be
// checked (a revision that does not resolve, a tree without the project).
func CheckUpstream(ctx context.Context, u *gitrepo.Upstream, t Target, rng [2]string, ps []*patches.Patch, opts Options) ([]Result, error) {
	if rng[0] == "" {
		h, err := u.Resolve(ctx, t.Ref)
		if err != nil {
			return nil, err
		}
		tr, err := gitrepo.OpenRevision(u.Repo, h, t.Project, t.URL)
		if err == nil {
			err = tr.CheckProject()
		}
		if err != nil {
			return nil, err
		}
		rs := CheckTree(ctx, tr, ps, opts)
		for i := range rs {
			rs[i].Ref, rs[i].Commit = t.Ref, h.String()
		}
		return rs, nil
	}
	to := rng[1]
	if to == "" {
		to = t.Ref
	}
	var hs [2]plumbing.Hash
	for i, rev := range []string{rng[0], to} {
		var err error
		if hs[i], err = u.Resolve(ctx, rev); err != nil {
			return nil, err
		}
	}
	tr, err := gitrepo.OpenRevision(u.Repo, hs[1], t.Project, t.URL)
	if err == nil {
		err = tr.CheckProject()
	}
	if err != nil {
		return nil, err
	}
	// The walk reads through a handle of its own; the closure keeps only the
	// path, so u and the pack index its handle loaded can go meanwhile.
	path := u.Path
	opts.reopen = func() (*git.Repository, error) { return gitrepo.OpenStore(path) }
	rs, err := Range(ctx, u.Repo, t.URL, t.Project, hs[0], hs[1], [2]string{rng[0], to}, ps, opts)
	for i := range rs {
		rs[i].Ref = to
	}
	return rs, err
}

// ErrNoRepository wraps the error of a checkout that is not in a git
// repository when a range was asked for.
type ErrNoRepository struct {
	Dir string
	Err error
}

func (e *ErrNoRepository) Error() string {
	return fmt.Sprintf("--range needs a git repository: %s: %v", e.Dir, e.Err)
}

func (e *ErrNoRepository) Unwrap() error { return e.Err }

// CheckCheckout checks ps on the checkout tree: as it is, or, when rng[0]
// is set, on every first-parent commit from rng[0] to rng[1] (HEAD when
// empty) of the git repository holding it. A resolve error comes back
// as is; an error of the range walk is the second result's.
func CheckCheckout(ctx context.Context, tree source.Tree, rng [2]string, ps []*patches.Patch, opts Options) (results []Result, setupErr, rangeErr error) {
	if rng[0] == "" {
		return CheckTree(ctx, tree, ps, opts), nil, nil
	}
	open := func() (*git.Repository, error) { return gitrepo.Open(tree.Root()) }
	repo, err := open()
	if err != nil {
		return nil, &ErrNoRepository{Dir: tree.Root(), Err: err}, nil
	}
	to := rng[1]
	if to == "" {
		to = "HEAD"
	}
	var hs [2]plumbing.Hash
	for i, rev := range []string{rng[0], to} {
		if hs[i], err = gitrepo.ResolveRevision(repo, rev); err != nil {
			return nil, fmt.Errorf("%s: %w", tree.Root(), err), nil
		}
	}
	opts.reopen = open
	rs, err := Range(ctx, repo, tree.Root(), tree.Project(), hs[0], hs[1], [2]string{rng[0], to}, ps, opts)
	return rs, nil, err
}

package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
)

// TreePatcher applies a cell's catalog patches with the engine's journaled
// apply and reverts exactly what it applied: a patch the tree already had
// before the run (applied by hand, or upstream) is left as it was found.
type TreePatcher struct {
	Catalog *patches.Catalog
	// Open returns the writable tree for a project (from --repo,
	// $SMPATCH_REPO, the current checkout or the installed package).
	Open        func(ctx context.Context, p source.Project) (source.WritableTree, error)
	ToolVersion string

	mu      sync.Mutex
	trees   map[source.Project]source.WritableTree
	applied map[string]source.WritableTree // patches this run applied, by name
	before  []string                       // patches the trees had when Check ran
}

// AppliedBefore names the patches the trees already had when Check ran
// (applied by hand): they stay applied for every cell, also for cells
// whose patch set lacks them.
func (tp *TreePatcher) AppliedBefore() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.before)
}

func (tp *TreePatcher) tree(ctx context.Context, p source.Project) (source.WritableTree, error) {
	if t, ok := tp.trees[p]; ok {
		return t, nil
	}
	t, err := tp.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	if tp.trees == nil {
		tp.trees = map[source.Project]source.WritableTree{}
	}
	tp.trees[p] = t
	return t, nil
}

// Check makes sure every name is in the catalog and the tree of each
// project opens, so a run can be refused before any cell starts.
func (tp *TreePatcher) Check(ctx context.Context, names []string) error {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, n := range names {
		p, err := tp.Catalog.Get(n)
		if err != nil {
			return err
		}
		if _, err := tp.tree(ctx, p.Project); err != nil {
			return fmt.Errorf("patch %s: %w", n, err)
		}
	}
	// A patch an earlier matrix run applied and never reverted (it was
	// killed) would be taken for one applied by hand and left in place, so
	// that cells without it ran with it.
	tp.before = nil
	for _, proj := range sortedProjects(tp.trees) {
		t := tp.trees[proj]
		st, err := patches.ReadState(ctx, t)
		if err != nil {
			return err
		}
		for _, e := range st.Patches {
			tp.before = append(tp.before, e.Name)
			for _, note := range e.Notes {
				if strings.HasPrefix(note, runNote) {
					return fmt.Errorf("%s: %s is still applied by an earlier matrix run that did not finish (%s); cells without it would run with it: revert it first (smpatch revert %s --repo %s)",
						t.Root(), e.Name, note, e.Name, t.Root())
				}
			}
		}
	}
	return nil
}

// runNote starts the journal note of every patch a matrix run applies.
const runNote = "smpatch matrix run, cell "

func sortedProjects(m map[source.Project]source.WritableTree) []source.Project {
	out := make([]source.Project, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Apply implements Patcher: every named patch resolves on its project's tree,
// or nothing is written.
func (tp *TreePatcher) Apply(ctx context.Context, cellID string, names []string) error {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.applied == nil {
		tp.applied = map[string]source.WritableTree{}
	}
	byProject := map[source.Project][]*patches.Patch{}
	var order []source.Project
	for _, n := range names {
		p, err := tp.Catalog.Get(n)
		if err != nil {
			return err
		}
		if _, ok := byProject[p.Project]; !ok {
			order = append(order, p.Project)
		}
		byProject[p.Project] = append(byProject[p.Project], p)
	}
	for _, proj := range order {
		t, err := tp.tree(ctx, proj)
		if err != nil {
			return err
		}
		set, err := patches.PlanSet(ctx, t, byProject[proj], patches.SetOptions{})
		if err != nil {
			return err
		}
		res, err := patches.Apply(ctx, t, set, patches.ApplyOptions{
			Notes:         []string{runNote + cellID},
			ToolVersion:   tp.ToolVersion,
			CatalogDigest: tp.Catalog.Digest(),
		})
		if res != nil {
			for _, po := range res.Patches {
				if po.Status == "applied" {
					tp.applied[po.Name] = t
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Revert implements Patcher: it reverts the named patches this patcher
// applied, and nothing else.
func (tp *TreePatcher) Revert(ctx context.Context, names []string) error {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	byTree := map[source.WritableTree][]string{}
	var order []source.WritableTree
	for _, n := range names {
		t, ok := tp.applied[n]
		if !ok {
			continue
		}
		if _, seen := byTree[t]; !seen {
			order = append(order, t)
		}
		byTree[t] = append(byTree[t], n)
	}
	var errs []error
	for _, t := range order {
		ns := byTree[t]
		if _, err := patches.Revert(ctx, t, tp.Catalog, ns, patches.RevertOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("%s in %s: %w", strings.Join(ns, ", "), t.Root(), err))
			continue
		}
		for _, n := range ns {
			delete(tp.applied, n)
		}
	}
	return errors.Join(errs...)
}

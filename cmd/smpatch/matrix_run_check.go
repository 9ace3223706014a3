package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/launch"
	"github.com/smpatch/smpatch/matrix"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
)

// dryRunChecks makes matrix run --dry-run check what the run itself would
// check before a cell starts: the runner is there (the docker CLI), the
// trees of the local runner open and hold no patch of an unfinished run,
// and each selected cell's patch set plans on its tree. It returns, per
// cell id, why the cell's patches would not apply; an error refuses the
// run as the real one would.
func dryRunChecks(ctx context.Context, g *globalOptions, o *matrixRunOptions, x *matrix.Expansion, cells []*launch.Cell, opts launch.Options) (map[string]string, error) {
	if c, ok := opts.Runner.(interface{ Check() error }); ok {
		if err := c.Check(); err != nil {
			return nil, err
		}
	}
	problems := map[string]string{}
	if o.Runner != "local" {
		return problems, nil
	}
	names := patchesToRun(cells, o.Only)
	if len(names) == 0 {
		return problems, nil
	}
	python := cellPython(g, x.Matrix)
	if _, err := newTreePatcher(ctx, g, o.Repo, python, names); err != nil {
		return nil, err
	}
	cat, err := g.loadCatalog()
	if err != nil {
		return nil, err
	}
	trees := map[source.Project]source.WritableTree{}
	selected := map[string]bool{}
	for _, id := range o.Only {
		selected[id] = true
	}
	for _, c := range cells {
		if c.Pruned != "" || len(c.Patches) == 0 || (len(selected) > 0 && !selected[c.ID]) {
			continue
		}
		ps, err := cat.GetAll(c.Patches)
		if err != nil {
			return nil, err
		}
		byProject := map[source.Project][]*patches.Patch{}
		for _, p := range ps {
			byProject[p.Project] = append(byProject[p.Project], p)
		}
		projects := make([]string, 0, len(byProject))
		for p := range byProject {
			projects = append(projects, string(p))
		}
		sort.Strings(projects)
		var why []string
		for _, name := range projects {
			proj := source.Project(name)
			t := trees[proj]
			if t == nil {
				if t, err = source.Resolve(ctx, o.Repo, proj, python); err != nil {
					return nil, err
				}
				trees[proj] = t
			}
			set, err := patches.PlanSet(ctx, t, byProject[proj], patches.SetOptions{})
			if err != nil {
				return nil, err
			}
			if p := set.Problem(); p != nil {
				why = append(why, p.Error())
			}
		}
		if len(why) > 0 {
			problems[c.ID] = strings.Join(why, "; ")
		}
	}
	return problems, nil
}

// dryRunProblemsError is the refusal of a dry run whose cells would fail
// to patch.
func dryRunProblemsError(problems map[string]string) error {
	ids := make([]string, 0, len(problems))
	for id := range problems {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return fmt.Errorf("dry run: the patches of %d cell(s) do not apply on the tree (%s); those cells would fail", len(ids), strings.Join(ids, ", "))
}

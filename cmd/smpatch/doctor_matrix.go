package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/smpatch/smpatch/doctor"
	"github.com/smpatch/smpatch/launch"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/probe"
	"github.com/smpatch/smpatch/source"
)

// cellDoctor is matrix run's doctor: each cell's launch decided on the
// tree the local runner patches, as the cell's patches leave it, with the
// host of --probe-file or of this machine (probed once), before any cell
// starts.
type cellDoctor struct {
	Repo      string
	ProbeFile string
	Catalog   func() (*patches.Catalog, error)
	Probe     func(ctx context.Context, o probe.Options) (*probe.Report, error)
	Warn      func(format string, args ...any)

	once     sync.Once
	off      bool // the tree could not be opened: said once, no cell doctored
	tree     source.Tree
	rules    []*doctor.Rule
	host     *probe.Report
	hostFrom string
	noHost   string
}

func (d *cellDoctor) setup(ctx context.Context, python string) {
	var err error
	if d.rules, err = doctor.Rules(); err != nil {
		d.Warn("doctor: not run: %v", err)
		d.off = true
		return
	}
	if d.tree, err = source.Resolve(ctx, d.Repo, source.SGLang, python); err != nil {
		d.Warn("doctor: not run: %v", err)
		d.off = true
		return
	}
	if d.ProbeFile != "" {
		if d.host, err = probe.ReadReport(d.ProbeFile); err == nil {
			d.hostFrom = d.ProbeFile
		}
	} else if d.host, err = d.Probe(ctx, hostRoots(probe.Options{Python: python})); err == nil {
		d.hostFrom = "live probe of this machine"
	}
	if err != nil {
		d.host, d.noHost = nil, err.Error()
	}
}

// check returns the cell's blockers as one reason, "" for none.
func (d *cellDoctor) check(ctx context.Context, c *launch.Cell, python string) (string, error) {
	if _, err := doctor.ParseLaunch(c.Command); err != nil {
		return "", nil // not an sglang server: nothing of doctor's to decide
	}
	d.once.Do(func() { d.setup(ctx, python) })
	if d.off {
		return "", ctx.Err()
	}
	changes, err := d.changes(ctx, c)
	if err != nil {
		d.Warn("doctor: cell %s not doctored: %v", c.ID, err)
		return "", ctx.Err()
	}
	env := environ()
	maps.Copy(env, c.Env)
	rep, err := doctor.Run(ctx, doctor.Inputs{Tree: doctor.Patched(d.tree, changes), Host: d.host, HostFrom: d.hostFrom, NoHost: d.noHost, Launch: c.Command, Env: env}, d.rules)
	var ie *doctor.InputError
	switch {
	case errors.Is(err, context.Canceled):
		return "", err
	case errors.As(err, &ie):
		d.Warn("doctor: cell %s not doctored: %v", c.ID, err)
		return "", nil
	case err != nil:
		return "", err
	}
	var why []string
	for _, f := range rep.Findings {
		if f.Severity == doctor.Blocker {
			why = append(why, fmt.Sprintf("%s: %s", f.Rule, f.Happens))
		}
	}
	return strings.Join(why, "; "), nil
}

// changes are what the cell's sglang patches write on the tree.
func (d *cellDoctor) changes(ctx context.Context, c *launch.Cell) (map[string][]byte, error) {
	if len(c.Patches) == 0 {
		return nil, nil
	}
	cat, err := d.Catalog()
	if err != nil {
		return nil, err
	}
	ps, err := cat.GetAll(c.Patches)
	if err != nil {
		return nil, err
	}
	var mine []*patches.Patch
	for _, p := range ps {
		if p.Project == source.SGLang {
			mine = append(mine, p)
		}
	}
	if len(mine) == 0 {
		return nil, nil
	}
	set, err := patches.PlanSet(ctx, d.tree, mine, patches.SetOptions{})
	if err != nil {
		return nil, err
	}
	if p := set.Problem(); p != nil {
		return nil, p
	}
	return set.Changes(), nil
}

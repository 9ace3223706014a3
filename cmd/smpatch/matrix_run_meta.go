package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"

	"github.com/smpatch/smpatch/launch"
	"github.com/smpatch/smpatch/probe"
	"github.com/smpatch/smpatch/source/gitrepo"
)

// runMeta is what matrix run knows of the run before it starts, for the
// head of results.html and results.md: this host, its GPUs (from
// --probe-file, else a quick probe of this machine when cells run here),
// and this smpatch. The tree's version and commit are added by the run,
// which opens the tree.
func (o *matrixRunOptions) runMeta(ctx context.Context, runner launch.RunnerKind) *launch.RunMeta {
	m := &launch.RunMeta{Smpatch: Version}
	if vi, err := readVersionInfo(); err == nil && vi.Commit != "unknown" {
		m.Smpatch += " (" + shortCommit(vi.Commit) + ")"
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown (" + err.Error() + ")"
	}
	m.Host = host
	switch {
	case o.ProbeFile != "":
		r, err := probe.ReadReport(o.ProbeFile)
		if err != nil {
			m.GPUs = "unknown (" + err.Error() + ")"
		} else {
			m.GPUs = gpusLine(r) + ", from " + o.ProbeFile
		}
	case runner == launch.RunnerLocal || runner == launch.RunnerDocker:
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := probe.Run(pctx, hostRoots(probe.Options{Python: o.DefaultPython, NoBinaries: true, Timeout: 5 * time.Second}))
		if err != nil {
			m.GPUs = "unknown (" + err.Error() + ")"
		} else {
			m.GPUs = gpusLine(r)
		}
	default:
		m.GPUs = "on the " + string(runner) + " nodes: not read here"
	}
	return m
}

// gpusLine is a report's GPUs, alike ones counted: "8 x NVIDIA RTX PRO
// 6000 Blackwell Server Edition (sm 12.0), nvidia-smi".
func gpusLine(r *probe.Report) string {
	if r.Host == nil {
		return "not read (no host in the report)"
	}
	if len(r.Host.GPUs) == 0 {
		if why, ok := r.Unknown["host.gpus"]; ok {
			return "none found (" + why + ")"
		}
		return "none found"
	}
	var kinds []string
	count := map[string]int{}
	for _, g := range r.Host.GPUs {
		k := g.Name
		if g.SM != "" {
			k += " (sm " + g.SM + ")"
		}
		if count[k] == 0 {
			kinds = append(kinds, k)
		}
		count[k]++
	}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d x %s", count[k], k)
	}
	line := strings.Join(parts, ", ")
	if r.Host.GPUSource != "" {
		line += ", " + r.Host.GPUSource
	}
	return line
}

// treeRevision is the commit checked out in the git repository holding
// dir, or "" when dir is in none. (Whether files differ from it is not
// read: on a whole sglang checkout that costs seconds.)
func treeRevision(dir string) string {
	st, wt, err := gitrepo.OpenGitStorage(dir)
	if err != nil {
		return ""
	}
	repo, err := git.Open(st, wt)
	if err != nil {
		return ""
	}
	head, err := repo.Head()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return shortCommit(head.Hash().String())
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

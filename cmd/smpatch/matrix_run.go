package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/launch"
	"github.com/smpatch/smpatch/matrix"
	"github.com/smpatch/smpatch/source"
)

// matrixRunOptions are the flags of "smpatch matrix run".
type matrixRunOptions struct {
	matrixOptions
	Only        []string
	Resume      bool
	DryRun      bool
	Runner      string
	Out         string
	Repo        string
	Refs        string
	Signatures  []string
	Concurrency int
	GPUs        string
	StopGrace   time.Duration
	ShmSize     string
	JSON        bool
	Repeat      int

	DockerNetwork, DockerGPUs string
	batchOptions
}

func (o *matrixRunOptions) AddFlags(c *cobra.Command) {
	o.matrixOptions.AddFlags(c)
	f := c.Flags()
	f.StringArrayVar(&o.Only, "only", nil, "run only this cell (repeatable)")
	f.BoolVar(&o.Resume, "resume", false, "keep the cells results.jsonl in --out already has and run the rest (with --only: run those again, keep the others)")
	f.BoolVar(&o.DryRun, "dry-run", false, "print what each cell would run; start nothing, change nothing")
	f.StringVar(&o.Runner, "runner", "", "where cells run: local (process groups on this host), docker, slurm (one job array) or kubernetes (Jobs) (default: the config file's runner, else local)")
	f.StringVar(&o.Out, "out", "", "results directory (default results/NAME, NAME from the matrix; the config file's results_dir replaces results)")
	f.StringVar(&o.Repo, "repo", "", "the tree the local runner patches (default: $SMPATCH_REPO, the current checkout, or the installed package)")
	f.StringVar(&o.Refs, "refs", "", "docker: a JSON file of cell id to image (matrix build writes it)")
	f.StringArrayVar(&o.Signatures, "signatures", nil, "a TOML file of extra triage signatures (repeatable)")
	f.IntVar(&o.Concurrency, "concurrency", 1, "cells at once (only for cells small enough to share the GPUs)")
	f.StringVar(&o.GPUs, "gpus", "", "GPU indices cells may use (0,1,...): each cell gets TP of them (CUDA_VISIBLE_DEVICES; docker --gpus device=), cells running at once never share one")
	f.DurationVar(&o.StopGrace, "stop-grace", 10*time.Second, "time between SIGTERM and SIGKILL when a server is stopped")
	f.StringVar(&o.ShmSize, "shm-size", "32g", "docker: --shm-size of each container")
	f.StringVar(&o.DockerNetwork, "docker-network", "host", "docker: host (--network=host) or bridge (the health URL's port published on 127.0.0.1)")
	f.StringVar(&o.DockerGPUs, "docker-gpus", "all", "docker: --gpus of each container (none: no --gpus, for hosts without GPUs)")
	f.BoolVar(&o.JSON, "json", false, "print the results as JSON")
	o.addBatchFlags(f)
	f.IntVar(&o.Repeat, "repeat", 0, "run each cell N times, a fresh server each time, round-robin over the cells (default: the matrix's launch.repeat, else 1)")
}

func newMatrixRunCmd(g *globalOptions) *cobra.Command {
	o := &matrixRunOptions{}
	c := &cobra.Command{
		Use:   "run FILE",
		Short: "Run each cell: patch, start, wait for health, bench, triage, stop, revert; one results table",
		Long: "Run the matrix's cells one after another (--concurrency for small cells). The local runner\n" +
			"applies each cell's patches to --repo, starts the cell's rendered run.sh (OUT/cells/ID/) in\n" +
			"its own process group, waits for the health URL while watching the process and the log,\n" +
			"runs the bench, stops the group and reverts the patches, also on failure and on Ctrl-C.\n" +
			"Logs go to OUT/logs/ID.log; results to OUT/results.{jsonl,json,csv,md} and OUT/junit.xml\n" +
			"(the markdown also to $GITHUB_STEP_SUMMARY). Exit 6 when a cell failed.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runMatrix(c.Context(), g, args[0], o, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	o.AddFlags(c)
	return c
}

func runMatrix(ctx context.Context, g *globalOptions, file string, o *matrixRunOptions, stdout, stderr io.Writer) error {
	x, err := expandMatrix(ctx, g, file, &o.matrixOptions)
	if err != nil {
		return err
	}
	if o.Runner == "" {
		o.Runner = g.runner()
	}
	var refs map[string]string
	if o.Refs != "" {
		if refs, err = matrix.ReadRefs(o.Refs); err != nil {
			return err
		}
	}
	sigs, err := launch.LoadSignatures(o.Signatures)
	if err != nil {
		return err
	}
	opts := launch.Options{
		Signatures:  sigs,
		Only:        o.Only,
		Resume:      o.Resume,
		Concurrency: o.Concurrency,
		StopGrace:   o.StopGrace,
		StepSummary: os.Getenv("GITHUB_STEP_SUMMARY"),
	}
	if o.Runner == "local" {
		if err := launch.HostWorkdirs(x); err != nil {
			return err
		}
	}
	cells, err := launch.FromExpansion(x, refs, &opts)
	if err != nil {
		return err
	}
	if o.Repeat != 0 {
		if o.Repeat < 1 || o.Repeat > 1000 {
			return exit.With(exit.Usage, fmt.Errorf("--repeat %d: want 1 to 1000", o.Repeat))
		}
		opts.Repeat = o.Repeat
	}
	opts.Out = o.Out
	if opts.Out == "" {
		opts.Out = filepath.Join(g.resultsDir(), x.Matrix.Slug())
	}
	if o.GPUs != "" {
		for _, id := range strings.Split(o.GPUs, ",") {
			id = strings.TrimSpace(id)
			if id == "" {
				return exit.With(exit.Usage, fmt.Errorf("--gpus %q: want a comma-separated list of GPU indices", o.GPUs))
			}
			opts.GPUs = append(opts.GPUs, id)
		}
	}
	if o.Concurrency < 1 {
		return exit.With(exit.Usage, fmt.Errorf("--concurrency %d: want 1 or more", o.Concurrency))
	}
	switch o.Runner {
	case "local":
		opts.Runner = launch.Local{}
	case "docker":
		opts.Runner = launch.Docker{ShmSize: o.ShmSize, Network: o.DockerNetwork, GPUs: o.DockerGPUs}
	case "slurm":
		opts.Runner, err = slurmRunner(g, file, o)
	case "kubernetes":
		opts.Runner, err = kubeRunner(x, cells, o)
	default:
		return exit.With(exit.Usage, fmt.Errorf("--runner %q: want local, docker, slurm or kubernetes", o.Runner))
	}
	if err != nil {
		return err
	}
	if o.DryRun {
		var prev map[string]*launch.Result
		if o.Resume {
			if prev, err = launch.ReadResults(opts.Out); err != nil {
				return err
			}
		}
		problems, err := dryRunChecks(ctx, g, o, x, cells, opts)
		if err != nil {
			return err
		}
		if err := printDryRun(stdout, cells, prev, opts, o, problems); err != nil {
			return err
		}
		if len(problems) > 0 {
			return exit.With(exit.Conflict, dryRunProblemsError(problems))
		}
		return nil
	}
	if o.Runner == "local" {
		if names := patchesToRun(cells, o.Only); len(names) > 0 {
			tp, err := newTreePatcher(ctx, g, o.Repo, cellPython(g, x.Matrix), names)
			if err != nil {
				return err
			}
			opts.Patcher = tp
			// A patch applied by hand stays applied for every cell: say so
			// where a cell's patch set lacks it, so its result is not read
			// as that patch set's.
			for _, name := range tp.AppliedBefore() {
				n := 0
				for _, c := range cells {
					if c.Pruned == "" && !slices.Contains(c.Patches, name) {
						c.Warnings = append(c.Warnings, fmt.Sprintf("the tree already had %s applied before this run: this cell ran with it", name))
						n++
					}
				}
				if n > 0 {
					fmt.Fprintf(stderr, "smpatch: warning: the tree already has %s applied (not by this run); %d cell(s) without it in their patch set run with it\n", name, n)
				}
			}
		}
	}
	opts.Warn = func(format string, args ...any) {
		fmt.Fprintf(stderr, "smpatch: warning: %s\n", fmt.Sprintf(format, args...))
	}
	if !g.Quiet {
		opts.Progress = func(format string, args ...any) {
			fmt.Fprintf(stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
		}
	}
	printCellCommands(g.detail(stderr), cells, o.Only)
	if !g.Quiet && isTerminal(stderr) {
		// Minutes of health wait and bench pass without a line otherwise;
		// not in a log file or a pipe.
		opts.Heartbeat = func(b launch.Beat) {
			fmt.Fprintf(stderr, "%s %s\n", time.Now().Format("15:04:05"), b)
		}
	}
	s, err := launch.Run(ctx, cells, opts)
	if s != nil {
		if o.JSON {
			if jerr := writeJSON(stdout, s); jerr != nil && err == nil {
				err = jerr
			}
		} else {
			s.WriteText(stdout)
			fmt.Fprintf(stdout, "results: %s\n", filepath.Join(opts.Out, launch.ResultsMD))
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("interrupted; patches reverted, finished cells recorded in %s (--resume to go on): %w", opts.Out, err)
		}
		return err
	}
	if s.Failed > 0 {
		return exit.With(exit.CellsFailed, fmt.Errorf("%d of %d cells failed; see %s", s.Failed, s.OK+s.Failed, filepath.Join(opts.Out, launch.ResultsMD)))
	}
	return nil
}

// patchesToRun is every patch name of the cells that will run.
func patchesToRun(cells []*launch.Cell, only []string) []string {
	sel := map[string]bool{}
	for _, id := range only {
		sel[id] = true
	}
	seen := map[string]bool{}
	var names []string
	for _, c := range cells {
		if c.Pruned != "" || (len(sel) > 0 && !sel[c.ID]) {
			continue
		}
		for _, n := range c.Patches {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return names
}

// cellPython is the interpreter whose installed project the local runner
// patches when no --repo says otherwise: --python, else the matrix's
// base.python (the environment the cells run in: run.sh puts its directory
// first on PATH), else python3.
func cellPython(g *globalOptions, m *matrix.Matrix) string {
	if g.Python != "" || m.Base.Python == "" {
		return g.PythonPath()
	}
	return m.Base.Python
}

// newTreePatcher loads the catalog and opens the tree of every project the
// patches touch, so a bad --repo is refused before any cell starts.
func newTreePatcher(ctx context.Context, g *globalOptions, repo, python string, names []string) (*launch.TreePatcher, error) {
	cat, err := g.loadCatalog()
	if err != nil {
		return nil, err
	}
	tp := &launch.TreePatcher{
		Catalog:     cat,
		ToolVersion: version,
		Open: func(ctx context.Context, p source.Project) (source.WritableTree, error) {
			return source.Resolve(ctx, repo, p, python)
		},
	}
	if err := tp.Check(ctx, names); err != nil {
		return nil, err
	}
	return tp, nil
}

// dryRunCell is the stable JSON of one cell in matrix run --dry-run --json.
type dryRunCell struct {
	ID      string             `json:"id"`
	Action  string             `json:"action"` // run, pruned, skipped, kept (--resume)
	Reason  string             `json:"reason,omitempty"`
	Values  []launch.AxisValue `json:"values"`
	Patches []string           `json:"patches"`
	Env     map[string]string  `json:"env"`
	Command []string           `json:"command"`
	Health  string             `json:"health,omitempty"`
	Bench   []string           `json:"bench,omitempty"`
	Image   string             `json:"image,omitempty"`
	Docker  []string           `json:"docker,omitempty"` // the docker command line (without "docker")
	Log     string             `json:"log"`
	Problem string             `json:"problem,omitempty"` // why the cell's patches do not apply on the tree
}

func printDryRun(w io.Writer, cells []*launch.Cell, prev map[string]*launch.Result, opts launch.Options, o *matrixRunOptions, problems map[string]string) error {
	only := map[string]bool{}
	for _, id := range o.Only {
		only[id] = true
	}
	var out []dryRunCell
	for _, c := range cells {
		d := dryRunCell{ID: c.ID, Action: "run", Values: c.Values, Patches: c.Patches, Env: c.Env, Command: c.Command,
			Health: c.Health, Bench: c.Bench, Log: filepath.Join(opts.Out, launch.LogsDir, c.ID+".log")}
		if d.Patches == nil {
			d.Patches = []string{}
		}
		if o.Runner == "docker" || o.Runner == "kubernetes" {
			d.Image = c.Image
			if dk, ok := opts.Runner.(launch.Docker); ok {
				d.Docker, _ = dk.RunArgs(c)
			}
		}
		d.Problem = problems[c.ID]
		switch {
		case c.Pruned != "":
			d.Action, d.Reason = "pruned", c.Pruned
		case only[c.ID]:
		case prev[c.ID] != nil && prev[c.ID].Finished():
			d.Action, d.Reason = "kept", "finished earlier ("+string(prev[c.ID].Status)+"), --resume keeps it"
		case len(only) > 0:
			d.Action, d.Reason = "skipped", "not selected by --only"
		}
		out = append(out, d)
	}
	if o.JSON {
		return writeJSON(w, map[string]any{"dry_run": true, "runner": o.Runner, "out": opts.Out, "baseline": opts.Baseline, "cells": out})
	}
	for _, d := range out {
		if d.Action != "run" {
			fmt.Fprintf(w, "%s: %s: %s\n", d.ID, d.Action, d.Reason)
			continue
		}
		fmt.Fprintf(w, "%s:\n", d.ID)
		if len(d.Patches) > 0 {
			if o.Runner == "local" || o.Runner == "slurm" {
				fmt.Fprintf(w, "  apply   %s (reverted afterwards)\n", strings.Join(d.Patches, ", "))
				if d.Problem != "" {
					fmt.Fprintf(w, "  FAILS   %s\n", d.Problem)
				} else {
					fmt.Fprintf(w, "  plan    the patches apply on the tree\n")
				}
			} else {
				fmt.Fprintf(w, "  image   %s (patches %s)\n", orNone(d.Image), strings.Join(d.Patches, ", "))
			}
		} else if o.Runner == "docker" || o.Runner == "kubernetes" {
			fmt.Fprintf(w, "  image   %s\n", orNone(d.Image))
		}
		keys := make([]string, 0, len(d.Env))
		for k := range d.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  env     %s=%s\n", k, d.Env[k])
		}
		fmt.Fprintf(w, "  run     %s\n", strings.Join(d.Command, " "))
		if len(d.Docker) > 0 {
			fmt.Fprintf(w, "  docker  docker %s\n", strings.Join(d.Docker, " "))
		}
		if d.Health != "" {
			fmt.Fprintf(w, "  health  %s\n", d.Health)
		}
		if len(d.Bench) > 0 {
			fmt.Fprintf(w, "  bench   %s\n", strings.Join(d.Bench, " "))
		}
		fmt.Fprintf(w, "  log     %s\n", d.Log)
	}
	fmt.Fprintln(w, "dry run: nothing was started or changed")
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none: build it with smpatch matrix build, pass --refs)"
	}
	return s
}

// printCellCommands prints, with --verbose, what each selected cell will
// run before the run starts: its patches, environment and command.
func printCellCommands(w io.Writer, cells []*launch.Cell, only []string) {
	for _, c := range cells {
		if c.Pruned != "" || (len(only) > 0 && !slices.Contains(only, c.ID)) {
			continue
		}
		keys := make([]string, 0, len(c.Env))
		for k := range c.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var env []string
		for _, k := range keys {
			env = append(env, k+"="+c.Env[k])
		}
		fmt.Fprintf(w, "cell %s: patches [%s] env [%s] run %s\n", c.ID, strings.Join(c.Patches, ", "), strings.Join(env, " "), strings.Join(c.Command, " "))
	}
}

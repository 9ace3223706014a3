package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/smpatch/smpatch/launch"
	"github.com/smpatch/smpatch/probe"
)

// matrixRunOptions are smpatch matrix run's flags, streams and
// dependencies.
type matrixRunOptions struct {
	IO IOStreams
	matrixOptions
	// Kube connects to the namespace of a cluster (asked for only by the
	// kubernetes runner).
	Kube func(kubeconfig, namespace string) (*launch.KubeClient, error)

	// What the global flags and the config file settled.
	DefaultRunner launch.RunnerKind // when --runner is not given
	ResultsDir    string            // where --out goes by default
	Python        string            // --python ("" when not given)
	DefaultPython string            // the interpreter --python or its default means
	Catalogs      []string          // --catalog
	Verbose       bool
	Quiet         bool

	File        string
	RunnerSet   bool // --runner was given
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
	NoDoctor    bool

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
	f.BoolVar(&o.NoDoctor, "no-doctor", false, "start cells without doctoring their launches first (local runner)")
}

func newMatrixRunCmd(f *Factory) *cobra.Command {
	o := &matrixRunOptions{matrixOptions: newMatrixOptions(f), Kube: f.Kube}
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
			o.IO, o.File, o.RunnerSet = streams(c), args[0], c.Flags().Changed("runner")
			o.DefaultRunner, o.ResultsDir = f.DefaultRunner(), f.ResultsDir()
			o.Python, o.DefaultPython, o.Catalogs = f.Python, f.PythonPath(), f.Catalogs
			o.Verbose, o.Quiet = f.Verbose, f.Quiet
			return runMatrix(c.Context(), o)
		},
	}
	o.AddFlags(c)
	return c
}

func runMatrix(ctx context.Context, o *matrixRunOptions) error {
	r, err := o.matrixRun(ctx)
	if err != nil {
		return err
	}
	res, err := launch.RunMatrix(ctx, r)
	if res != nil {
		if perr := printMatrixRun(o.IO.Out, res, o.JSON); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

// matrixRun turns the options into the library's MatrixRun.
func (o *matrixRunOptions) matrixRun(ctx context.Context) (launch.MatrixRun, error) {
	stderr := o.IO.ErrOut
	r := launch.MatrixRun{
		File:          o.File,
		ProbeFile:     o.ProbeFile,
		Warn:          o.WarnNCCL,
		Runner:        o.DefaultRunner,
		ResultsDir:    o.ResultsDir,
		Refs:          o.Refs,
		Signatures:    o.Signatures,
		Repo:          o.Repo,
		Python:        o.Python,
		DefaultPython: o.DefaultPython,
		Catalog:       o.Catalog,
		ToolVersion:   Version,
		Docker:        launch.Docker{ShmSize: o.ShmSize, Network: o.DockerNetwork, GPUs: o.DockerGPUs},
		Partition:     o.Partition,
		SbatchArgs:    o.SbatchArgs,
		Kube:          func() (*launch.KubeClient, error) { return o.Kube(o.Kubeconfig, o.Namespace) },
		DryRun:        o.DryRun,
		Options: launch.Options{
			Out:         o.Out,
			Only:        o.Only,
			Resume:      o.Resume,
			Concurrency: o.Concurrency,
			StopGrace:   o.StopGrace,
			StepSummary: os.Getenv("GITHUB_STEP_SUMMARY"),
			Warn: func(format string, args ...any) {
				fmt.Fprintf(stderr, "smpatch: warning: %s\n", fmt.Sprintf(format, args...))
			},
		},
	}
	var err error
	if o.RunnerSet {
		if r.Runner, err = launch.ParseRunnerKind(o.Runner); err != nil {
			return r, fmt.Errorf("--%w", err) // the flag's name, then the kinds
		}
	}
	if r.Expand, err = o.expandOptions(ctx); err != nil {
		return r, err
	}
	if o.Repeat != 0 {
		if o.Repeat < 1 || o.Repeat > 1000 {
			return r, withCode(exitUsage, fmt.Errorf("--repeat %d: want 1 to 1000", o.Repeat))
		}
		r.Options.Repeat = o.Repeat
	}
	if o.GPUs != "" {
		for _, id := range strings.Split(o.GPUs, ",") {
			id = strings.TrimSpace(id)
			if id == "" {
				return r, withCode(exitUsage, fmt.Errorf("--gpus %q: want a comma-separated list of GPU indices", o.GPUs))
			}
			r.Options.GPUs = append(r.Options.GPUs, id)
		}
	}
	if o.Concurrency < 1 {
		return r, withCode(exitUsage, fmt.Errorf("--concurrency %d: want 1 or more", o.Concurrency))
	}
	if r.Runner == launch.RunnerSlurm {
		if r.SlurmCommand, err = o.slurmCommand(); err != nil {
			return r, err
		}
	}
	if !o.NoDoctor && r.Runner == launch.RunnerLocal {
		d := &cellDoctor{Repo: o.Repo, ProbeFile: o.ProbeFile, Catalog: o.Catalog, Probe: probe.Run, Warn: r.Options.Warn}
		r.Doctor = d.check
	}
	if !o.DryRun {
		r.Options.Meta = o.runMeta(ctx, r.Runner)
		r.TreeRevision = treeRevision
	}
	if o.Verbose {
		r.Commands = stderr
	}
	if !o.Quiet {
		r.Options.Progress = func(format string, args ...any) {
			fmt.Fprintf(stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
		}
		if IsTerminal(stderr) {
			// Minutes of health wait and bench pass without a line
			// otherwise; not in a log file or a pipe.
			r.Options.Heartbeat = func(b launch.Beat) {
				fmt.Fprintf(stderr, "%s %s\n", time.Now().Format("15:04:05"), b)
			}
		}
	}
	return r, nil
}

// printMatrixRun prints a run's results table (or JSON), or a dry run's
// plan.
func printMatrixRun(w io.Writer, res *launch.MatrixResult, asJSON bool) error {
	if res.DryRun != nil {
		return printDryRun(w, res.DryRun, asJSON)
	}
	if asJSON {
		return WriteJSON(w, res.Summary)
	}
	res.Summary.WriteText(w)
	fmt.Fprintf(w, "results: %s\n", filepath.Join(res.Out, launch.ResultsMD))
	return nil
}

func printDryRun(w io.Writer, plan *launch.DryRun, asJSON bool) error {
	if asJSON {
		return WriteJSON(w, plan)
	}
	byImage := plan.Runner == launch.RunnerDocker || plan.Runner == launch.RunnerKubernetes
	for _, d := range plan.Cells {
		if d.Action != "run" {
			fmt.Fprintf(w, "%s: %s: %s\n", d.ID, d.Action, d.Reason)
			continue
		}
		fmt.Fprintf(w, "%s:\n", d.ID)
		if len(d.Patches) > 0 {
			if !byImage {
				fmt.Fprintf(w, "  apply   %s (reverted afterwards)\n", strings.Join(d.Patches, ", "))
				if d.Problem != "" {
					fmt.Fprintf(w, "  FAILS   %s\n", d.Problem)
				} else {
					fmt.Fprintf(w, "  plan    the patches apply on the tree\n")
				}
			} else {
				fmt.Fprintf(w, "  image   %s (patches %s)\n", orNone(d.Image), strings.Join(d.Patches, ", "))
			}
		} else if byImage {
			fmt.Fprintf(w, "  image   %s\n", orNone(d.Image))
		}
		keys := slices.Sorted(maps.Keys(d.Env))
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
	fmt.Fprintln(w, dryRunCount(plan))
	return nil
}

// dryRunCount is the dry run's last line: how many cells would run, how
// many would not and why, how many would fail to patch.
func dryRunCount(plan *launch.DryRun) string {
	byAction := map[string]int{}
	var actions []string
	fails := 0
	for _, d := range plan.Cells {
		if byAction[d.Action] == 0 {
			actions = append(actions, d.Action)
		}
		byAction[d.Action]++
		if d.Problem != "" {
			fails++
		}
	}
	parts := []string{nCells(byAction["run"]) + " would run"}
	for _, a := range actions {
		if a != "run" {
			parts = append(parts, fmt.Sprintf("%d %s", byAction[a], a))
		}
	}
	if fails > 0 {
		parts = append(parts, fmt.Sprintf("%d whose patches do not apply", fails))
	}
	return "dry run: " + strings.Join(parts, ", ") + "; nothing was started or changed"
}

func orNone(s string) string {
	if s == "" {
		return "(none: build it with smpatch matrix build, pass --refs)"
	}
	return s
}

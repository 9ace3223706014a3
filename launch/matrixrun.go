package launch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/smpatch/smpatch/internal/shell"
	"github.com/smpatch/smpatch/matrix"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/source"
)

// MatrixRun is one run of a matrix file: what "smpatch matrix run" asks
// for, as plain data. RunMatrix does the rest.
type MatrixRun struct {
	File      string               // the matrix file
	ProbeFile string               // a probe report whose facts the rules read ("" for none)
	Expand    matrix.ExpandOptions // how the file expands (CheckPatch: the catalog lookup)
	Warn      func(string)         // the file's NCCL_* names NCCL does not document; nil for none

	// Runner is where cells run.
	Runner RunnerKind
	// TreeRevision, when set, reads the git commit checked out in the
	// repository holding a directory ("" for none), for the results' head.
	TreeRevision func(dir string) string
	// Options are the run's options; RunMatrix fills what the matrix
	// decides (metrics, timeouts, baseline, name), Out when empty, the
	// runner and the patcher. Repeat, when not 0, replaces the matrix's.
	Options Options
	// ResultsDir is where Out goes when empty: ResultsDir/SLUG.
	ResultsDir string
	Refs       string   // a JSON file of cell id to image (matrix build writes it)
	Signatures []string // TOML files of extra triage signatures

	// The local runner's trees: Repo ("" for $SMPATCH_REPO, the current
	// checkout or the installed package), the interpreter whose installed
	// project is patched (Python when given, else the matrix's
	// base.python, else DefaultPython), and the catalog, loaded when a
	// cell to run has patches.
	Repo, Python, DefaultPython string
	Catalog                     func() (*patches.Catalog, error)
	ToolVersion                 string

	Docker       Docker   // the docker runner's settings
	SlurmCommand []string // the slurm runner's Slurm.Command
	Partition    string   // slurm: sbatch --partition
	SbatchArgs   []string // slurm: further sbatch options
	// Kube connects the kubernetes runner to its cluster and namespace
	// (NewKubeClient); it is called only for that runner, once.
	Kube func() (*KubeClient, error)

	// DryRun checks what the run would check before a cell starts and
	// says what each cell would run; it starts nothing, changes nothing.
	DryRun bool
	// Commands, when set, receives each selected cell's patches,
	// environment and command before the run starts.
	Commands io.Writer
	// Doctor, when set, decides each selected cell's launch (on the tree
	// of the interpreter python) before any cell starts: a blocker it
	// returns prunes the cell with it as the reason ("" for none).
	Doctor func(ctx context.Context, c *Cell, python string) (blocker string, err error)
}

// MatrixResult is what a matrix run gives back: the summary of the cells
// that ran, or the plan of a dry run.
type MatrixResult struct {
	Out     string   // the results directory
	Summary *Summary // nil for a dry run
	DryRun  *DryRun  // nil for a real run
}

// DryRun is what matrix run --dry-run found: per cell, what would happen.
type DryRun struct {
	Baseline string       `json:"baseline"`
	Cells    []DryRunCell `json:"cells"`
	DryRun   bool         `json:"dry_run"`
	Out      string       `json:"out"`
	Runner   RunnerKind   `json:"runner"`
}

// DryRunCell is one cell of a dry run.
type DryRunCell struct {
	ID      string            `json:"id"`
	Action  string            `json:"action"` // run, pruned, skipped, kept (--resume)
	Reason  string            `json:"reason,omitempty"`
	Values  []AxisValue       `json:"values"`
	Patches []string          `json:"patches"`
	Env     map[string]string `json:"env"`
	Command []string          `json:"command"`
	Health  string            `json:"health,omitempty"`
	Bench   []string          `json:"bench,omitempty"`
	Image   string            `json:"image,omitempty"`
	Docker  []string          `json:"docker,omitempty"` // the docker command line (without "docker")
	Log     string            `json:"log"`
	Problem string            `json:"problem,omitempty"` // why the cell's patches do not apply on the tree
}

// RunMatrix expands r.File, turns its cells into runnable cells, picks the
// runner of r.Runner's kind and runs them (or, with r.DryRun, checks and
// plans them). The result comes back with the error when there is one to
// show: a dry run whose patches do not apply (*DryRunConflictError), failed
// cells (*CellsFailedError), an interrupted run. A kind that is no runner
// is an *UnknownRunnerError, before the file is read.
func RunMatrix(ctx context.Context, r MatrixRun) (*MatrixResult, error) {
	if !r.Runner.Valid() {
		return nil, &UnknownRunnerError{Name: string(r.Runner)}
	}
	x, err := matrix.ExpandFile(r.File, r.ProbeFile, r.Expand, r.Warn)
	if err != nil {
		return nil, err
	}
	var refs map[string]string
	if r.Refs != "" {
		if refs, err = matrix.ReadRefs(r.Refs); err != nil {
			return nil, err
		}
	}
	opts := r.Options
	if opts.Signatures, err = LoadSignatures(r.Signatures); err != nil {
		return nil, err
	}
	if r.Runner == RunnerLocal {
		if err := HostWorkdirs(x); err != nil {
			return nil, err
		}
	}
	cells, err := FromExpansion(x, refs, &opts)
	if err != nil {
		return nil, err
	}

	if r.Options.Repeat != 0 {
		opts.Repeat = r.Options.Repeat
	}
	if opts.Out == "" {
		opts.Out = filepath.Join(r.ResultsDir, x.Matrix.Slug())
	}
	if r.Runner == RunnerSlurm {
		// The array script names the results directory: refused here,
		// before anything is submitted or written (RunBatch checks again).
		if err := shell.Check(opts.Out); err != nil {
			return nil, fmt.Errorf("slurm runner: the results directory %w; the array script carries it on one line: choose another --out", err)
		}
	}
	opts.Runner = r.runner(x, cells, opts.Out)
	python := r.Python
	if python == "" {
		python = x.Matrix.Base.Python
	}
	if python == "" {
		python = r.DefaultPython
	}
	if r.Doctor != nil {
		for _, c := range cells {
			if c.Pruned != "" || len(opts.Only) > 0 && !slices.Contains(opts.Only, c.ID) {
				continue
			}
			why, err := r.Doctor(ctx, c, python)
			if err != nil {
				return nil, err
			}
			if why != "" {
				c.Pruned = "doctor: " + why
			}
		}
	}
	res := &MatrixResult{Out: opts.Out}
	if r.DryRun {
		res.DryRun, err = r.dryRun(ctx, python, cells, opts)
		if res.DryRun == nil {
			return nil, err
		}
		return res, err
	}
	// A results directory that would be refused is refused before any
	// tree is opened or waited for (Run checks it again, and holds it).
	if err := checkOut(opts.Out); err != nil {
		return nil, err
	}
	if err := probeOut(opts.Out); err != nil {
		return nil, err
	}
	if r.Runner == RunnerLocal {
		var tp *TreePatcher
		if names := patchesToRun(cells, opts.Only); len(names) > 0 {
			if tp, err = r.treePatcher(ctx, python, names); err != nil {
				return nil, err
			}
			opts.Patcher = tp
		}
		trees, err := r.holdTrees(ctx, source.Project(x.Matrix.Project), python, cells, tp, &opts)
		if err != nil {
			return nil, err
		}
		defer trees.release()
		if tp != nil {
			// Read again now that the trees are this run's: a run that
			// held them may have left patches behind.
			if err := tp.Check(ctx, patchesToRun(cells, opts.Only)); err != nil {
				return nil, err
			}
			warnAppliedBefore(tp.AppliedBefore(), cells, opts.Warn)
		}
	}
	if opts.Meta != nil {
		r.treeMeta(ctx, x, python, &opts)
	}
	if r.Commands != nil {
		writeCellCommands(r.Commands, cells, opts.Only)
	}
	res.Summary, err = Run(ctx, cells, opts)
	if res.Summary == nil {
		return nil, err
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return res, fmt.Errorf("patches reverted, finished cells recorded in %s (--resume to go on): %w", opts.Out, err)
		}
		return res, err
	}
	if s := res.Summary; s.Failed > 0 {
		return res, &CellsFailedError{Failed: s.Failed, Ran: s.OK + s.Failed, Results: filepath.Join(opts.Out, ResultsMD)}
	}
	return res, nil
}

// runner is the runner of r.Runner's kind, which is valid.
func (r *MatrixRun) runner(x *matrix.Expansion, cells []*Cell, out string) Runner {
	switch r.Runner {
	case RunnerDocker:
		d := r.Docker
		if d.Prefix == "" {
			d.Prefix = RunPrefix(out)
		}
		return d
	case RunnerSlurm:
		return Slurm{Command: r.SlurmCommand, Partition: r.Partition, Args: r.SbatchArgs}
	case RunnerKubernetes:
		// Each cell's Job as matrix render writes it, with the cell's
		// image (Refs, else base.image).
		images := map[string]string{}
		for _, c := range cells {
			images[c.ID] = c.Image
		}
		k := &Kube{Client: r.Kube, Jobs: map[string]*batchv1.Job{}}
		for _, mc := range x.Cells {
			if mc.Pruned == nil {
				k.Jobs[mc.ID] = Job(x, mc, images[mc.ID])
			}
		}
		return k
	}
	return Local{}
}

// RunPrefix starts the names of the containers of the run whose results go
// to out: "smpatch-" and 8 hex digits of the results directory's absolute
// path. A run resumed into the same directory finds (and removes) what an
// interrupted run of it left; two runs of one matrix into two directories
// never touch each other's containers.
func RunPrefix(out string) string {
	if abs, err := filepath.Abs(out); err == nil {
		out = abs
	}
	sum := sha256.Sum256([]byte(out))
	return "smpatch-" + hex.EncodeToString(sum[:4])
}

// treePatcher loads the catalog and opens the tree of every project the
// patches touch, so a bad Repo is refused before any cell starts.
func (r *MatrixRun) treePatcher(ctx context.Context, python string, names []string) (*TreePatcher, error) {
	cat, err := r.Catalog()
	if err != nil {
		return nil, err
	}
	tp := &TreePatcher{
		Catalog:     cat,
		ToolVersion: r.ToolVersion,
		Open: func(ctx context.Context, p source.Project) (source.WritableTree, error) {
			return source.Resolve(ctx, r.Repo, p, python)
		},
	}
	if err := tp.Check(ctx, names); err != nil {
		return nil, err
	}
	return tp, nil
}

// warnAppliedBefore says, on each cell whose patch set lacks it, that a
// patch applied by hand stays applied for every cell, so the cell's result
// is not read as that patch set's.
func warnAppliedBefore(before []string, cells []*Cell, warn func(format string, args ...any)) {
	for _, name := range before {
		n := 0
		for _, c := range cells {
			if c.Pruned == "" && !slices.Contains(c.Patches, name) {
				c.Warnings = append(c.Warnings, fmt.Sprintf("the tree already had %s applied before this run: this cell ran with it", name))
				n++
			}
		}
		if n > 0 && warn != nil {
			warn("the tree already has %s applied (not by this run); %d cell(s) without it in their patch set run with it", name, n)
		}
	}
}

// patchesToRun is every patch name of the cells that will run.
func patchesToRun(cells []*Cell, only []string) []string {
	seen := map[string]bool{}
	var names []string
	for _, c := range cells {
		if c.Pruned != "" || (len(only) > 0 && !slices.Contains(only, c.ID)) {
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

// dryRun checks what the run itself would check before a cell starts (the
// runner is there, the local runner's trees open and hold no patch of an
// unfinished run, each selected cell's patch set plans on its tree) and
// says what each cell would do. An error with a plan is the refusal of
// cells whose patches do not apply.
func (r *MatrixRun) dryRun(ctx context.Context, python string, cells []*Cell, opts Options) (*DryRun, error) {
	if err := checkOut(opts.Out); err != nil {
		return nil, err
	}
	if err := probeOut(opts.Out); err != nil {
		return nil, err
	}
	var prev map[string]*Result
	if opts.Resume {
		var err error
		if prev, err = ReadResults(opts.Out); err != nil {
			return nil, err
		}
	}
	if err := opts.Runner.Check(ctx); err != nil {
		return nil, err
	}
	problems := map[string]string{}
	if r.Runner == RunnerLocal {
		if names := patchesToRun(cells, opts.Only); len(names) > 0 {
			tp, err := r.treePatcher(ctx, python, names)
			if err != nil {
				return nil, err
			}
			if problems, err = planCells(ctx, tp, cells, opts.Only); err != nil {
				return nil, err
			}
		}
	}
	d := &DryRun{DryRun: true, Runner: r.Runner, Out: opts.Out, Baseline: opts.Baseline}
	for _, c := range cells {
		dc := DryRunCell{ID: c.ID, Action: "run", Values: c.Values, Patches: c.Patches, Env: c.Env, Command: c.Command,
			Health: c.Health, Bench: c.Bench, Log: filepath.Join(opts.Out, LogsDir, c.ID+".log"), Problem: problems[c.ID]}
		if dc.Patches == nil {
			dc.Patches = []string{}
		}
		if r.Runner == RunnerDocker || r.Runner == RunnerKubernetes {
			dc.Image = c.Image
			if dk, ok := opts.Runner.(Docker); ok && c.Pruned == "" && c.Image != "" {
				var err error
				if dc.Docker, err = dk.RunArgs(c); err != nil && isRegistryRef(c.Image) {
					return nil, err // what the run would refuse, refused here
				}
			}
		}
		switch {
		case c.Pruned != "":
			dc.Action, dc.Reason = "pruned", c.Pruned
		case slices.Contains(opts.Only, c.ID):
		case prev[c.ID] != nil && prev[c.ID].Finished():
			dc.Action, dc.Reason = "kept", "finished earlier ("+string(prev[c.ID].Status)+"), --resume keeps it"
		case len(opts.Only) > 0:
			dc.Action, dc.Reason = "skipped", "not selected by --only"
		}
		d.Cells = append(d.Cells, dc)
	}
	if len(problems) > 0 {
		ids := make([]string, 0, len(problems))
		for id := range problems {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		return d, &DryRunConflictError{Cells: ids}
	}
	return d, nil
}

// planCells plans each selected cell's patch set on its trees, one set per
// project, and returns, per cell id, why the patches would not apply.
func planCells(ctx context.Context, tp *TreePatcher, cells []*Cell, only []string) (map[string]string, error) {
	trees := map[source.Project]source.WritableTree{}
	problems := map[string]string{}
	for _, c := range cells {
		if c.Pruned != "" || len(c.Patches) == 0 || (len(only) > 0 && !slices.Contains(only, c.ID)) {
			continue
		}
		ps, err := tp.Catalog.GetAll(c.Patches)
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
				if t, err = tp.Open(ctx, proj); err != nil {
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

// writeCellCommands writes what each selected cell will run: its patches,
// environment and command, one line each.
func writeCellCommands(w io.Writer, cells []*Cell, only []string) {
	for _, c := range cells {
		if c.Pruned != "" || (len(only) > 0 && !slices.Contains(only, c.ID)) {
			continue
		}
		keys := slices.Sorted(maps.Keys(c.Env))
		var env []string
		for _, k := range keys {
			env = append(env, k+"="+c.Env[k])
		}
		fmt.Fprintf(w, "cell %s: patches [%s] env [%s] run %s\n", c.ID, strings.Join(c.Patches, ", "), strings.Join(env, " "), strings.Join(c.Command, " "))
	}
}

// treeMeta adds to o.Meta (a copy) what the results' head says of the
// tree: the one the local runner patches, with its version and commit,
// or the images of the other runners.
func (r *MatrixRun) treeMeta(ctx context.Context, x *matrix.Expansion, python string, o *Options) {
	m := *o.Meta
	o.Meta = &m
	if r.Runner != RunnerLocal {
		switch {
		case r.Refs != "":
			m.Tree = "the images of " + r.Refs
		case x.Matrix.Base.Image != "":
			m.Tree = "image " + x.Matrix.Base.Image
		}
		return
	}
	t, err := source.Resolve(ctx, r.Repo, source.Project(x.Matrix.Project), python)
	if err != nil {
		m.Tree = "unknown (" + err.Error() + ")"
		return
	}
	m.Tree = t.Root()
	if v, _, err := t.Version(ctx); err == nil && v != nil {
		m.TreeVersion = string(t.Project()) + " " + source.VersionString(v)
	}
	if r.TreeRevision != nil {
		m.TreeRevision = r.TreeRevision(t.Root())
	}
}

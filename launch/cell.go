package launch

import (
	"context"
	"fmt"
	"regexp"
	"time"
)

// Cell is one variant to run, as the matrix expanded and rendered it.
type Cell struct {
	ID      string
	Values  []AxisValue       // in axis order
	Env     map[string]string // added to the server's environment
	Command []string          // the server command, rendered
	Workdir string
	// Health is the URL that answers 200 once the server is up. Empty: the
	// command is a job (a benchmark of its own); the cell is done when it
	// exits, and metrics are read from its output.
	Health string
	// Bench runs once the server is healthy; metrics are read from its output.
	Bench   []string
	Patches []string // catalog patch names, applied to the tree by the local runner
	Image   string   // the cell's image, for the docker runner
	// Files are the cell's rendered launch files (matrix render: run.sh, env,
	// sitecustomize.py). When they hold a run.sh, the local runner writes
	// them to OUT/cells/<id>/ and starts run.sh instead of Command.
	Files map[string][]byte
	// TP is how many GPUs the cell uses (its tensor-parallel size); 0 is 1.
	TP int
	// Pruned is why a rule removed the cell ("" when it runs).
	Pruned   string
	Warnings []string

	script string   // the written run.sh, set by Run
	gpus   []string // the GPUs Options.GPUs lent the cell for this run
	repeat int      // 1-based repeat of this run when the cell runs more than once
}

// AxisValue is a cell's value on one axis.
type AxisValue struct {
	Axis  string `json:"axis"`
	Value string `json:"value"`
}

// Metric is a named regular expression whose first group is a number in the
// bench output (or a job's output). The last match counts.
type Metric struct {
	Name string
	Re   *regexp.Regexp
}

// Patcher changes the tree a local cell runs from. Apply applies the named
// patches (all or nothing); Revert puts back what Apply changed. Revert is
// called after every Apply, also after a failure or an interrupt.
type Patcher interface {
	Apply(ctx context.Context, cellID string, names []string) error
	Revert(ctx context.Context, names []string) error
}

// Options says how a run goes.
type Options struct {
	Out        string      // results directory: logs/, results.jsonl, ...
	Name       string      // the matrix name, for titles
	Runner     Runner      // Local{} when nil
	Patcher    Patcher     // required when a cell to run has patches and the runner is local
	Signatures *Signatures // DefaultSignatures() when nil
	Metrics    []Metric
	Baseline   string // cell id the others are compared with ("" for none)
	// Meta is what the caller knows of the run (host, GPUs, version, tree)
	// for the head of the results; Run adds the times and the patches.
	Meta *RunMeta

	StartupTimeout time.Duration // health wait (or a job's whole run); 30m when 0
	BenchTimeout   time.Duration // 20m when 0
	StopGrace      time.Duration // SIGTERM to SIGKILL; 10s when 0
	HealthInterval time.Duration // between health probes; 1s when 0

	Concurrency int // cells at once; 1 when 0 (a TP-8 cell owns every GPU)
	// GPUs are the GPU indices cells may use ("0", "1", ...). When set, each
	// cell gets TP of them for its run, as CUDA_VISIBLE_DEVICES (local) or
	// --gpus device=... (docker), and cells running at once never share
	// one. A cell whose env sets CUDA_VISIBLE_DEVICES keeps its own.
	GPUs   []string
	Only   []string // run only these cell ids
	Resume bool     // keep the results of cells results.jsonl already has
	// Repeat runs every cell this many times, each a fresh server process,
	// round-robin over the cells (all cells once, then all again) so that
	// drift of the machine spreads over every cell; 1 when 0.
	Repeat int
	// StepSummary is a file the markdown table is appended to
	// ($GITHUB_STEP_SUMMARY); "" for none. Failing to append to it is a
	// warning (Warn), not an error: the results are written either way.
	StepSummary string
	// Warn receives warnings (one line each, no newline); nil: standard error.
	Warn func(format string, args ...any)
	// Progress receives one line per cell as it starts and ends; nil for none.
	Progress func(format string, args ...any)
	// Heartbeat, when set, is called every HeartbeatEvery (10 s when 0)
	// while a cell waits for health or runs its bench.
	Heartbeat      func(Beat)
	HeartbeatEvery time.Duration

	pos map[string]int // cell id -> 1-based position among the cells to run
	out *outDir        // the results directory, held by Run
}

// tag names a cell in progress lines: "[2/6] ID".
func (o *Options) tag(id string) string {
	if p, ok := o.pos[id]; ok {
		return fmt.Sprintf("[%d/%d] %s", p, len(o.pos), id)
	}
	return id
}

func (o *Options) defaults() {
	if o.Runner == nil {
		o.Runner = Local{}
	}
	if o.Signatures == nil {
		o.Signatures = DefaultSignatures()
	}
	if o.StartupTimeout <= 0 {
		o.StartupTimeout = 30 * time.Minute
	}
	if o.BenchTimeout <= 0 {
		o.BenchTimeout = 20 * time.Minute
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = time.Second
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
}

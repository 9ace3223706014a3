package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/smpatch/smpatch/internal/runner"
	"github.com/smpatch/smpatch/internal/shell"
)

// Slurm submits the cells as a Slurm job array (one array per GPU count,
// each task asking for --gres=gpu:TP) and follows it with squeue --json,
// falling back to sacct for tasks squeue no longer lists. Each task runs
// Command with "--runner local --only ID --out DIR" on its node: smpatch
// there patches the node's tree, starts the cell's run.sh, waits for health,
// benches, stops and reverts, as the local runner does, and writes the
// cell's result and log into DIR, which RunBatch reads back. OUT must
// therefore be on a file system the nodes share with this host, and Command
// must name an smpatch, a matrix file and a tree that exist on the nodes.
type Slurm struct {
	// Command is the smpatch command line that runs a cell on a node,
	// without --runner, --only and --out: the executable, "matrix", "run",
	// the matrix file and the options to pass on (--repo, --signatures...).
	Command []string
	// Partition is sbatch --partition ("" for the cluster's default).
	Partition string
	// Args are further sbatch options (--account=..., --constraint=...).
	Args []string
	// Bin is the directory of sbatch, squeue, sacct and scancel; PATH
	// when empty.
	Bin string
	// Poll is the time between two squeue calls (1s when 0).
	Poll time.Duration
}

// Kind implements Runner.
func (Slurm) Kind() RunnerKind { return RunnerSlurm }

// slurmTimeout bounds each call of sbatch, squeue, sacct and scancel: a
// controller that does not answer must not hang the run.
const slurmTimeout = 2 * time.Minute

// Start implements Runner; Slurm runs cells only as a batch (RunBatch).
func (Slurm) Start(context.Context, *Cell, io.Writer) (Server, error) {
	return nil, errors.New("the slurm runner submits cells as a job array (RunBatch)")
}

func (s Slurm) tool(name string) string {
	if s.Bin != "" {
		return filepath.Join(s.Bin, name)
	}
	return name
}

// Check implements Runner: it refuses a run before anything is submitted
// when the Slurm commands are missing or there is no command for the nodes.
func (s Slurm) Check(context.Context) error {
	for _, t := range []string{"sbatch", "squeue", "sacct", "scancel"} {
		if _, err := exec.LookPath(s.tool(t)); err != nil {
			return fmt.Errorf("slurm runner: %s was not found (install the Slurm client commands, or use --runner local)", t)
		}
	}
	if len(s.Command) == 0 {
		return errors.New("slurm runner: no smpatch command for the nodes")
	}
	return nil
}

// slurmTask is what the runner knows about one array task.
type slurmTask struct {
	cell    *Cell
	array   string // array job id
	index   int    // array task id
	job     string // the task's own job id, once squeue shows it
	state   string
	reason  string
	exit    string
	node    string
	started time.Time
	done    bool
}

func (t *slurmTask) name() string { return t.array + "_" + strconv.Itoa(t.index) }

// SlurmDir is the folder under OUT that holds the array scripts, the
// tasks' output files and each task's own results (tasks/ID/).
const SlurmDir = "slurm"

// RunBatch implements BatchRunner.
func (s Slurm) RunBatch(ctx context.Context, cells []*Cell, o *Options, record func(*Cell, *Result) error) error {
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return err
	}
	base := filepath.Join(out, SlurmDir)
	// The array script quotes every word, and holds each on one line.
	if err := shell.Check(out); err != nil {
		return fmt.Errorf("slurm runner: the results directory %w; the array script carries it on one line: choose another --out", err)
	}
	for _, a := range s.Command {
		if err := shell.Check(a); err != nil {
			return fmt.Errorf("slurm runner: the node command's argument %w; the array script carries it on one line", err)
		}
	}
	for _, c := range cells {
		if err := shell.Check(c.ID); err != nil {
			return fmt.Errorf("slurm runner: cell id %w", err)
		}
	}
	if err := o.out.mkdirAll(SlurmDir + "/tasks"); err != nil {
		return err
	}
	poll := s.Poll
	if poll <= 0 {
		poll = time.Second
	}
	var tasks []*slurmTask
	var arrays []string
	var recErr error
	for _, grp := range groupByGPUs(cells) {
		if ctx.Err() != nil {
			break
		}
		id, err := s.submit(ctx, base, grp, o)
		if err != nil {
			for _, c := range grp {
				r := newResult(c, *o)
				r.Log = ""
				r.Status, r.Reason = StatusFailed, "slurm: "+oneLineErr(err)
				o.Progress("%s: failed: %s", o.tag(c.ID), r.Reason)
				recErr = errors.Join(recErr, record(c, r))
			}
			continue
		}
		arrays = append(arrays, id)
		o.Progress("slurm: submitted array job %s: %d task(s), --gres=gpu:%d", id, len(grp), max(grp[0].TP, 1))
		for i, c := range grp {
			tasks = append(tasks, &slurmTask{cell: c, array: id, index: i})
		}
	}
	byKey := map[string]*slurmTask{}
	for _, t := range tasks {
		byKey[t.name()] = t
	}
	left := len(tasks)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for left > 0 {
		select {
		case <-ctx.Done():
			return errors.Join(recErr, s.cancel(arrays, byKey, o))
		case <-tick.C:
		}
		for _, a := range arrays {
			infos, err := s.queue(ctx, a)
			if ctx.Err() != nil {
				break
			}
			if err != nil {
				o.Progress("slurm: squeue: %s", oneLineErr(err))
				continue
			}
			for _, in := range infos {
				s.update(ctx, byKey, a, in, o)
			}
		}
		// Tasks squeue forgot (MinJobAge passed) are looked up in sacct.
		s.accounting(ctx, tasks)
		for _, t := range tasks {
			if t.done || !slurmFinal(t.state) {
				continue
			}
			t.done = true
			left--
			r := s.collect(base, t, o)
			recErr = errors.Join(recErr, record(t.cell, r))
		}
	}
	return recErr
}

// groupByGPUs splits the cells, keeping their order, by the GPUs they ask
// for: a job array has one --gres for all its tasks.
func groupByGPUs(cells []*Cell) [][]*Cell {
	var groups [][]*Cell
	at := map[int]int{}
	for _, c := range cells {
		n := max(c.TP, 1)
		i, ok := at[n]
		if !ok {
			i = len(groups)
			at[n] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], c)
	}
	return groups
}

// ArrayScript is the batch script of one array: task N runs cell N of ids.
func (s Slurm) ArrayScript(base string, ids []string) []byte {
	var b bytes.Buffer
	b.WriteString("#!/bin/bash\n")
	b.WriteString("# Written by smpatch matrix run --runner slurm: array task N runs cell N below\n")
	b.WriteString("# on its node with the local runner (patch, run.sh, health, bench, stop,\n")
	b.WriteString("# revert) and leaves its result and log in " + shell.Comment(filepath.Join(base, "tasks", "ID")) + ".\n")
	b.WriteString("set -u\n")
	b.WriteString("cells=(\n")
	for _, id := range ids {
		b.WriteString("  " + shell.Quote(id) + "\n")
	}
	b.WriteString(")\n")
	b.WriteString("id=${cells[$SLURM_ARRAY_TASK_ID]}\n")
	b.WriteString("dir=" + shell.Quote(filepath.Join(base, "tasks")) + "/$id\n")
	b.WriteString("rm -rf -- \"$dir\" && mkdir -p -- \"$dir\" || exit 1\n")
	b.WriteString("# The summary is this host's to write, once, from the whole run.\n")
	b.WriteString("unset GITHUB_STEP_SUMMARY\n")
	b.WriteString("echo \"smpatch: cell $id: job ${SLURM_JOB_ID:-?} on $(hostname) with CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-}\"\n")
	b.WriteString("exec")
	for _, a := range s.Command {
		b.WriteString(" " + shell.Quote(a))
	}
	b.WriteString(" --runner local --only \"$id\" --out \"$dir\"\n")
	return b.Bytes()
}

// SbatchArgs is the sbatch command line (without the executable) that
// submits script for n cells using gpus GPUs each.
func (s Slurm) SbatchArgs(base, script, name string, n, gpus int, o *Options) []string {
	limit := o.StartupTimeout + o.BenchTimeout + 2*o.StopGrace
	minutes := int((limit+time.Minute-1)/time.Minute) + 2
	args := []string{"--parsable",
		"--job-name=smpatch-" + unsafeName().ReplaceAllString(name, "_"),
		fmt.Sprintf("--array=0-%d%%%d", n-1, max(o.Concurrency, 1)),
		fmt.Sprintf("--gres=gpu:%d", gpus),
		"--ntasks=1",
		"--time=" + strconv.Itoa(minutes),
		"--output=" + filepath.Join(base, "%A_%a.out"),
	}
	if s.Partition != "" {
		args = append(args, "--partition="+s.Partition)
	}
	args = append(args, s.Args...)
	return append(args, script)
}

func (s Slurm) submit(ctx context.Context, base string, grp []*Cell, o *Options) (string, error) {
	ids := make([]string, len(grp))
	for i, c := range grp {
		ids[i] = c.ID
	}
	gpus := max(grp[0].TP, 1)
	name := fmt.Sprintf("array-gpu%d.sh", gpus)
	script := filepath.Join(base, name)
	if err := o.out.writeFile(SlurmDir+"/"+name, s.ArrayScript(base, ids), 0o755); err != nil {
		return "", err
	}
	job := o.Name
	if job == "" {
		job = "matrix"
	}
	res, err := runner.Run(ctx, slurmTimeout, s.tool("sbatch"), s.SbatchArgs(base, script, job, len(grp), gpus, o)...)
	if err != nil {
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("sbatch: %s", msg)
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), ";")
	if _, err := strconv.Atoi(id); err != nil {
		return "", fmt.Errorf("sbatch printed %q, not a job id", res.Stdout)
	}
	return id, nil
}

// queue is squeue --json for one array. An array squeue no longer knows
// gives no tasks and no error.
func (s Slurm) queue(ctx context.Context, array string) ([]SqueueTask, error) {
	res, err := runner.Run(ctx, slurmTimeout, s.tool("squeue"), "--json", "--jobs="+array)
	if err != nil {
		if bytes.Contains(res.Stderr, []byte("Invalid job id")) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s%s", bytes.TrimSpace(res.Stderr), err)
	}
	return ParseSqueueJSON(res.Stdout)
}

func (s Slurm) update(ctx context.Context, byKey map[string]*slurmTask, array string, in SqueueTask, o *Options) {
	if in.ArrayJobID != "" && in.ArrayJobID != array {
		return
	}
	var hit []*slurmTask
	if in.Task >= 0 {
		if t := byKey[array+"_"+strconv.Itoa(in.Task)]; t != nil {
			hit = append(hit, t)
		}
	} else {
		// The pending rest of the array: "3-7%1".
		for _, t := range byKey {
			if t.array == array && t.state == "" && inTaskRange(in.TaskRange, t.index) {
				hit = append(hit, t)
			}
		}
	}
	for _, t := range hit {
		if t.done {
			continue
		}
		if in.Task >= 0 {
			t.job = in.JobID
		}
		if t.state != in.State || t.reason != in.Reason {
			switch {
			case in.State == "RUNNING" && t.state != "RUNNING":
				t.started = time.Now()
				o.Progress("%s: slurm %s running on %s", o.tag(t.cell.ID), t.name(), in.Node)
			case in.State == "PENDING" && in.Reason != "" && in.Reason != "None" && in.Reason != t.reason:
				o.Progress("%s: slurm %s pending (%s)", o.tag(t.cell.ID), t.name(), in.Reason)
			}
		}
		t.state, t.reason, t.exit = in.State, in.Reason, in.Exit
		if in.Node != "" {
			t.node = in.Node
		}
	}
}

func inTaskRange(spec string, i int) bool {
	spec, _, _ = strings.Cut(spec, "%")
	for _, part := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			continue
		}
		b := a
		if isRange {
			hi, _, _ = strings.Cut(hi, ":") // a step
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil {
				continue
			}
		}
		if i >= a && i <= b {
			return true
		}
	}
	return false
}

// accounting asks sacct (the jobcomp record when there is no slurmdbd)
// about tasks that squeue stopped listing before they were seen to end.
func (s Slurm) accounting(ctx context.Context, tasks []*slurmTask) {
	var ids []string
	for _, t := range tasks {
		if !t.done && t.job != "" && !slurmFinal(t.state) {
			ids = append(ids, t.job)
		}
	}
	if len(ids) == 0 {
		return
	}
	jobs, format := "--jobs="+strings.Join(ids, ","), "--format=JobID,State,ExitCode,NodeList"
	res, err := runner.Run(ctx, slurmTimeout, s.tool("sacct"), "-X", "-n", "-P", jobs, format)
	if err != nil {
		if res, err = runner.Run(ctx, slurmTimeout, s.tool("sacct"), "-c", "-n", "-P", jobs, format); err != nil {
			return
		}
	}
	recs := ParseSacct(res.Stdout)
	for _, t := range tasks {
		if rec, ok := recs[t.job]; ok && !t.done && slurmFinal(rec.State) {
			t.state, t.exit = rec.State, rec.Exit
			if rec.Node != "" {
				t.node = rec.Node
			}
		}
	}
}

// cancel withdraws the arrays (scancel) and waits until none of their
// tasks runs any more, so the nodes' smpatch reverted its patches.
func (s Slurm) cancel(arrays []string, byKey map[string]*slurmTask, o *Options) error {
	if len(arrays) == 0 {
		return nil
	}
	ctx, stop := context.WithTimeout(context.Background(), 2*time.Minute+o.StopGrace)
	defer stop()
	o.Progress("slurm: scancel %s", strings.Join(arrays, " "))
	if res, err := runner.Run(ctx, slurmTimeout, s.tool("scancel"), arrays...); err != nil {
		return fmt.Errorf("scancel %s: %s%s%w", strings.Join(arrays, " "), res.Stdout, res.Stderr, err)
	}
	for ctx.Err() == nil {
		busy := false
		for _, a := range arrays {
			infos, err := s.queue(ctx, a)
			if err != nil {
				busy = true
				continue
			}
			for _, in := range infos {
				if !slurmFinal(in.State) && in.State != "PENDING" {
					busy = true
				}
			}
		}
		if !busy {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("slurm: tasks of %s still running after scancel", strings.Join(arrays, " "))
}

// slurmFinal tells whether a job state is an end.
func slurmFinal(state string) bool {
	switch state {
	case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
		"PREEMPTED", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT":
		return true
	}
	return false
}

// collect makes the cell's result from what its task left: the result and
// log the node's smpatch wrote, else (the task died before it could
// write them) the Slurm state and the task's output.
func (s Slurm) collect(base string, t *slurmTask, o *Options) *Result {
	c := t.cell
	// What the task wrote is read through the results directory's root:
	// nothing outside it, whatever links the nodes left.
	dir := SlurmDir + "/tasks/" + c.ID
	outRel := SlurmDir + "/" + t.name() + ".out"
	outFile := filepath.Join(base, t.name()+".out")
	fsys := o.out.root.FS()
	r := newResult(c, *o)
	where := fmt.Sprintf("slurm job %s", t.name())
	if t.job != "" {
		where += " (job " + t.job + ")"
	}
	if t.node != "" {
		where += " on " + t.node
	}
	where += ": " + t.state
	if t.exit != "" {
		where += ", " + t.exit
	}

	var log bytes.Buffer
	fmt.Fprintf(&log, "%s%s\n", NotePrefix, where)
	fmt.Fprintf(&log, "%stask output: %s\n", NotePrefix, outFile)
	// The task's own output: smpatch's progress on the node and whatever
	// Slurm said; notes, never triaged.
	if data, err := readTailFS(fsys, outRel, 1<<20); err == nil {
		for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
			fmt.Fprintf(&log, "%stask: %s\n", NotePrefix, l)
		}
	}
	nodeResults, rerr := readJSONL(fsys, dir+"/"+ResultsJSONL)
	if err := writeNodeLog(o.out, r.Log, log.Bytes(), dir+"/"+LogsDir+"/"+c.ID+".log"); err != nil {
		o.Progress("%s: %s", o.tag(c.ID), err)
	}
	if got := nodeResults[c.ID]; rerr == nil && got != nil && got.Finished() {
		got.Runner, got.Log, got.Resumed = s.Kind(), r.Log, false
		got.Warnings = c.Warnings
		if got.Status == StatusOK && t.state != "COMPLETED" {
			got.Status, got.Reason = StatusFailed, where
		}
		progressResult(o, c, got)
		return got
	}
	r.Status, r.Reason = StatusFailed, where
	if t.reason != "" && t.reason != "None" {
		r.Reason += " (" + t.reason + ")"
	}
	if !t.started.IsZero() {
		r.Started = t.started.UTC().Format(time.RFC3339)
		r.Seconds = secondsSince(t.started)
	}
	if v, err := triageFS(o.Signatures, fsys, outRel, outFile); err == nil {
		if v.Known {
			r.Triage = v.Cause
		} else {
			r.Tail = lastN(v.Tail, 8)
		}
	}
	progressResult(o, c, r)
	return r
}

func progressResult(o *Options, c *Cell, r *Result) {
	if r.Status == StatusOK {
		o.Progress("%s: ok%s", o.tag(c.ID), metricsText(r.Metrics))
		return
	}
	label := "unknown"
	if r.Triage != nil {
		label = r.Triage.Label
	}
	o.Progress("%s: failed: %s [%s]", o.tag(c.ID), r.Reason, label)
}

// writeNodeLog writes the cell's log here: the notes, then the log the task
// wrote on the node (nodeLog, under the results directory), copied as a
// stream (a server's log may be gigabytes), at most MaxCellLog of it.
func writeNodeLog(od *outDir, path string, notes []byte, nodeLog string) error {
	f, err := od.createLog(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(notes); err != nil {
		f.Close()
		return err
	}
	if in, err := openRegular(od.root.FS(), nodeLog); err == nil {
		_, err = io.Copy(f, io.LimitReader(in, MaxCellLog))
		in.Close()
		if err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// Package launch runs the cells of a matrix and reads their logs: it starts
// each cell's server (a local process group or a docker container), waits for
// its health URL while watching the process and its log, runs the benchmark,
// captures metrics, stops everything it started and records one Result per
// cell (JSON lines, JSON, CSV, markdown, JUnit). Schedulers take whole
// batches: a Slurm job array, or one Kubernetes Job per cell (Job renders
// it, for matrix render's job.yaml too; KubeClient speaks to the cluster).
//
// RunMatrix is the whole of "smpatch matrix run" as one call: a MatrixRun
// (the file, how it expands, the runner's kind and settings, the run's
// Options) goes in; it expands the file, turns the cells into runnable
// Cells, picks the runner (RunnerKind: local, docker, slurm, kubernetes),
// checks the trees, runs (or, for a dry run, plans) them, and a
// MatrixResult comes back for the caller to print. What went wrong comes
// back as typed errors (CellsFailedError, DryRunConflictError,
// UnknownRunnerError).
//
// A run holds its results directory (a marker, a lock; every file written
// through an os.Root of it, never through a link) and, with the local
// runner, the trees its cells run from (a lock per tree in the user's
// state directory: exclusive to patch, shared to run from).
//
// Triage names why a server died: Signatures (TOML, built-in plus the user's)
// map a log line to a label, its meaning and what to try; the first fatal line
// of a log is its verdict. The main types are Signatures, Verdict, Runner,
// Cell and Result.
//
// It must not decide whether patches apply (TreePatcher hands the cell's
// patches to patches.PlanSet and patches.Apply), run a program but through
// internal/runner, know the command line, or choose exit codes.
package launch

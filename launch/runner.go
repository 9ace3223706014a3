package launch

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// RunnerKind names where a matrix's cells run.
type RunnerKind string

// The runner kinds.
const (
	RunnerLocal      RunnerKind = "local"      // process groups on this host
	RunnerDocker     RunnerKind = "docker"     // a container each
	RunnerSlurm      RunnerKind = "slurm"      // one job array
	RunnerKubernetes RunnerKind = "kubernetes" // a Job each
)

// RunnerKinds are every kind, in the order help and completion list them.
func RunnerKinds() []RunnerKind {
	return []RunnerKind{RunnerLocal, RunnerDocker, RunnerSlurm, RunnerKubernetes}
}

// UnknownRunnerError is the refusal of a name that is no runner kind.
type UnknownRunnerError struct{ Name string }

func (e *UnknownRunnerError) Error() string {
	var names []string
	for _, k := range RunnerKinds() {
		names = append(names, string(k))
	}
	want := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	return fmt.Sprintf("runner %q: want %s", e.Name, want)
}

// ParseRunnerKind reads a runner's name; a name that is no kind (the empty
// one included) is an *UnknownRunnerError listing the kinds.
func ParseRunnerKind(name string) (RunnerKind, error) {
	k := RunnerKind(name)
	if !k.Valid() {
		return "", &UnknownRunnerError{Name: name}
	}
	return k, nil
}

// Valid reports whether k is one of the kinds.
func (k RunnerKind) Valid() bool {
	switch k {
	case RunnerLocal, RunnerDocker, RunnerSlurm, RunnerKubernetes:
		return true
	}
	return false
}

// Runner starts a cell's server somewhere: a process group on this host
// (Local) or a container (Docker). Schedulers (Slurm, Kube) are
// BatchRunners.
type Runner interface {
	// Kind is the runner's kind.
	Kind() RunnerKind
	// Check refuses a run before any cell starts or anything is written:
	// the runner's tools, daemon or cluster are missing, or its settings
	// are wrong.
	Check(ctx context.Context) error
	// Start starts the cell's command; everything it prints goes to log.
	// The server keeps running until Stop, whatever happens to ctx.
	Start(ctx context.Context, c *Cell, log io.Writer) (Server, error)
}

// BatchRunner hands every cell to run to a scheduler at once (Slurm,
// Kubernetes) instead of starting them one by one: RunBatch submits the
// cells, follows them and calls record with each cell's result as it ends.
// When ctx is cancelled it withdraws what it submitted and returns; cells
// that did not end are not recorded.
type BatchRunner interface {
	Runner
	RunBatch(ctx context.Context, cells []*Cell, o *Options, record func(*Cell, *Result) error) error
}

// Server is a started cell.
type Server interface {
	// Exited is closed once the server's main process has exited.
	Exited() <-chan struct{}
	// ExitErr is how the main process ended (nil for status 0); valid once
	// Exited is closed.
	ExitErr() error
	// Exec runs a command beside the server, where the server runs (the
	// bench: on this host for local, inside the container for docker), with
	// the cell's environment; its output goes to out. Cancelling ctx ends it
	// and everything it started.
	Exec(ctx context.Context, argv []string, out io.Writer) error
	// Stop ends the server and everything it started: SIGTERM first, SIGKILL
	// after grace. It returns once nothing is left, or an error saying what
	// could not be stopped.
	Stop(grace time.Duration) error
}

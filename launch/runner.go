package launch

import (
	"context"
	"io"
	"time"
)

// Runner starts a cell's server somewhere: a process group on this host
// (Local) or a container (Docker). Schedulers (Slurm, Kube) are
// BatchRunners.
type Runner interface {
	// Name is "local", "docker", "slurm" or "kubernetes".
	Name() string
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

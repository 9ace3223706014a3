package main

import (
	"context"
	"os"

	"github.com/smpatch/smpatch/internal/interrupt"
)

func main() { os.Exit(mainCode()) }

// mainCode runs the command line of the process and returns its exit code.
func mainCode() int {
	// SIGINT and SIGTERM cancel the command's context (caught from about
	// the first millisecond of the process on, by package interrupt):
	// whatever is running stops, cleans up, says in one line what it left,
	// and the process exits 130.
	ctx, stop := interrupt.Context(context.Background())
	defer stop()
	return execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

package main

import (
	"context"
	"errors"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/journal"
)

// exitCodeOf maps an error to the process exit code README.md documents.
// Library packages return typed errors and know nothing of exit codes;
// this is the one place that turns them into codes. Errors of the command
// layer itself carry their code (exit.With: usage errors, --check-arch's
// refusal).
func exitCodeOf(err error) int {
	var (
		conflict *patches.ConflictError
		refused  *patches.RevertRefusedError
		edited   *journal.EditedError
	)
	switch {
	case err == nil:
		return exit.OK
	case exit.Code(err) != exit.Failure:
		return exit.Code(err)
	case isCobraUsageError(err):
		return exit.Usage
	case errors.Is(err, context.Canceled):
		return exit.Interrupted
	case errors.As(err, &conflict):
		return exit.Conflict
	case errors.As(err, &refused), errors.As(err, &edited):
		return exit.RevertRefused
	}
	return exit.Failure
}

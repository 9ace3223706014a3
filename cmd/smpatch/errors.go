package main

import (
	"context"
	"errors"

	"github.com/smpatch/smpatch/internal/exit"
	"github.com/smpatch/smpatch/launch"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/journal"
)

// exitCodeOf maps an error to the process exit code README.md documents.
// Library packages return typed errors and know nothing of exit codes;
// this is the one place that turns them into codes. Errors of the command
// layer itself carry their code (exit.With: usage errors, --check-arch's
// refusal).
func exitCodeOf(err error) int {
	switch {
	case err == nil:
		return exit.OK
	case exit.Code(err) != exit.Failure:
		return exit.Code(err)
	case isCobraUsageError(err), isA[*launch.UnknownRunnerError](err):
		return exit.Usage
	case errors.Is(err, context.Canceled): // a stop (journal.StoppedError among them)
		return exit.Interrupted
	case isA[*patches.ConflictError](err), isA[*patches.Problem](err), isA[*launch.DryRunConflictError](err):
		return exit.Conflict // a patch does not apply (apply, image apply, matrix build, a dry run)
	case isA[*patches.RevertRefusedError](err), isA[*journal.EditedError](err):
		return exit.RevertRefused
	case isA[*launch.CellsFailedError](err):
		return exit.CellsFailed
	}
	return exit.Failure
}

// isA reports whether err's chain holds an error of type E.
func isA[E error](err error) bool {
	var e E
	return errors.As(err, &e)
}

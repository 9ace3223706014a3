package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/smpatch/smpatch/doctor"
	"github.com/smpatch/smpatch/internal/confined"
	"github.com/smpatch/smpatch/launch"
	"github.com/smpatch/smpatch/matrix"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/author"
	"github.com/smpatch/smpatch/patches/journal"
)

// exitCodeOf maps an error to the process exit code README.md documents.
// Library packages return typed errors and know nothing of exit codes;
// this is the one place that turns them into codes. Errors of the command
// layer itself carry their code (withCode: usage errors, --check-arch's
// refusal).
func exitCodeOf(err error) int {
	switch {
	case err == nil:
		return exitOK
	case codeOf(err) != exitFailure:
		return codeOf(err)
	case isCobraUsageError(err), isA[*launch.UnknownRunnerError](err):
		return exitUsage
	case errors.Is(err, context.Canceled): // a stop (journal.StoppedError among them)
		return exitInterrupted
	case isA[*patches.ConflictError](err), isA[*patches.Problem](err), isA[*launch.DryRunConflictError](err):
		return exitConflict // a patch does not apply (apply, image apply, matrix build, a dry run)
	case isA[*patches.RevertRefusedError](err), isA[*journal.EditedError](err):
		return exitRevertRefused
	case isA[*launch.CellsFailedError](err):
		return exitCellsFailed
	case isA[*author.InputError](err), isA[*patches.AdoptError](err), isA[*author.OfflineError](err):
		return exitFailure // new, import, refresh: bad input (a binary file, no pristine source, an entry that exists)
	case isA[*doctor.InputError](err), isA[*doctor.NotSGLangError](err):
		return exitFailure // doctor's bad input: a config.json, an architecture, a launch, a tree's version
	case isA[*launch.OutBusyError](err), isA[*launch.NotResultsError](err), isA[*confined.EntryError](err),
		isA[*confined.TooManyEntriesError](err), errors.Is(err, matrix.ErrTooMuch):
		return exitFailure // bad input: a results directory refused, a template past its bounds
	}
	return exitFailure
}

// isA reports whether err's chain holds an error of type E.
func isA[E error](err error) bool {
	var e E
	return errors.As(err, &e)
}

// The exit codes README.md documents.
const (
	exitOK            = 0   // done, or nothing to do
	exitFailure       = 1   // bad input file, I/O, network
	exitUsage         = 2   // unknown command or flag
	exitRefused       = 3   // refused by --check-arch: a requirement is not met; doctor found a blocker
	exitConflict      = 4   // a hunk conflicts (apply), or a patch conflicts upstream (check)
	exitRevertRefused = 5   // a patched file changed since it was applied
	exitCellsFailed   = 6   // matrix run: one or more cells failed
	exitInterrupted   = 130 // stopped by SIGINT or SIGTERM
)

// codeError is an error of the command layer with the exit code it ends
// the process with.
type codeError struct {
	Code int
	Err  error
}

func (e *codeError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *codeError) Unwrap() error { return e.Err }

// withCode wraps err so that it ends the process with code. A nil err
// stays nil.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &codeError{Code: code, Err: err}
}

// silentCode is an error that sets the exit code without a message of
// its own: the command already printed what the user needs (a conflict
// table, say).
func silentCode(code int) error { return &codeError{Code: code} }

// codeOf is the exit code err carries: 0 for nil, the code of the
// outermost *codeError in its chain, else exitFailure.
func codeOf(err error) int {
	if err == nil {
		return exitOK
	}
	var e *codeError
	if errors.As(err, &e) {
		return e.Code
	}
	return exitFailure
}

// isSilent reports whether err carries only an exit code and no message.
func isSilent(err error) bool {
	var e *codeError
	return errors.As(err, &e) && e.Err == nil
}

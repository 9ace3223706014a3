package exit

import (
	"errors"
	"fmt"
)

// The exit codes README.md documents.
const (
	OK            = 0   // done, or nothing to do
	Failure       = 1   // bad input file, I/O, network
	Usage         = 2   // unknown command or flag
	Refused       = 3   // refused by --check-arch: a requirement is not met
	Conflict      = 4   // a hunk conflicts (apply), or a patch conflicts upstream (check)
	RevertRefused = 5   // a patched file changed since it was applied
	CellsFailed   = 6   // matrix run: one or more cells failed
	Interrupted   = 130 // stopped by SIGINT or SIGTERM
)

// Error is an error with the exit code it should end the process with.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// With wraps err so that it ends the process with code. A nil err stays nil.
func With(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// Silent is an error that sets the exit code without a message of its own:
// the command already printed what the user needs (a conflict table, say).
func Silent(code int) error { return &Error{Code: code} }

// Code is the exit code for err: 0 for nil, the code of the outermost *Error
// in its chain, else Failure.
func Code(err error) int {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Failure
}

// IsSilent reports whether err carries only an exit code and no message.
func IsSilent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Err == nil
}

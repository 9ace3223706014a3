package journal

import (
	"fmt"
	"strings"

	"github.com/smpatch/smpatch/internal/termsafe"
)

// StoppedError is a command its context stopped (Ctrl-C, SIGTERM, a
// deadline): What says in one line what it left and how, the tree being
// original or patched as the journal says. It wraps the context's error.
type StoppedError struct {
	What string
	Err  error
}

func (e *StoppedError) Error() string { return e.What }
func (e *StoppedError) Unwrap() error { return e.Err }

// EditedError is an entry in flight that cannot be finished: a file it
// would write back has bytes the interrupted command could not have left
// (edited since). Nothing was written.
type EditedError struct {
	Entry string
	Op    string // "apply" or "revert"
	Files []string
}

func (e *EditedError) Error() string {
	return fmt.Sprintf("%s changed since the interrupted %s of %s (neither the bytes before it nor the bytes it wrote); nothing written: keep your edits, or put the file back, then run `smpatch journal forget %s` to drop the entry and keep the tree as it is",
		termsafe.Line(strings.Join(e.Files, ", ")), e.Op, e.Entry, e.Entry)
}

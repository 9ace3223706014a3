package launch

import (
	"fmt"
	"strings"
)

// CellsFailedError is the end of a run in which cells failed; the results
// were written all the same.
type CellsFailedError struct {
	Failed, Ran int    // the cells that failed, of those that ran
	Results     string // the results table (results.md)
}

func (e *CellsFailedError) Error() string {
	return fmt.Sprintf("%d of %d cells failed; see %s", e.Failed, e.Ran, e.Results)
}

// DryRunConflictError is a dry run's refusal of cells whose patches do not
// apply on the tree: those cells would fail.
type DryRunConflictError struct {
	Cells []string // their ids, sorted
}

func (e *DryRunConflictError) Error() string {
	return fmt.Sprintf("dry run: the patches of %d cell(s) do not apply on the tree (%s); those cells would fail", len(e.Cells), strings.Join(e.Cells, ", "))
}

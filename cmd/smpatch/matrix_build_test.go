package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/image"
	"github.com/smpatch/smpatch/patches"
)

// writeRefs keeps the refs of cells an earlier build made that this one
// did not touch, drops those of cells that failed now or that the matrix
// no longer has, and refuses a file that is not a refs file.
func TestWriteRefs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "refs.json")
	first := []cellOutcome{
		{ID: "a", Status: image.StatusBuilt, Ref: "reg/x@sha256:aa"},
		{ID: "b", Status: image.StatusBuilt, Ref: "reg/x@sha256:bb"},
		{ID: "c", Status: image.StatusBuilt, Ref: "reg/x@sha256:cc"},
	}
	if err := writeRefs(file, first, nil); err != nil {
		t.Fatal(err)
	}
	again := []cellOutcome{{ID: "b", Status: image.StatusFailed, Reason: "x"}, {ID: "d", Status: image.StatusSkipped, Ref: "reg/x@sha256:dd"}}
	if err := writeRefs(file, again, func(id string) bool { return id != "c" }); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	if got := string(b); got != "{\n  \"a\": \"reg/x@sha256:aa\",\n  \"d\": \"reg/x@sha256:dd\"\n}\n" {
		t.Errorf("refs:\n%s", got)
	}
	os.WriteFile(file, []byte("[1, 2]"), 0o644)
	if err := writeRefs(file, again, nil); err == nil || !strings.Contains(err.Error(), "want a JSON object of cell id to image reference") {
		t.Errorf("not a refs file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "[1, 2]" {
		t.Errorf("a file that is not a refs file was changed: %s", b)
	}
}

// cellsError gives exit 4 when a cell's patch does not apply, else 1,
// and nil when no cell failed.
func TestCellsError(t *testing.T) {
	prob := &patches.Problem{Plan: &patches.Plan{Patch: &patches.Patch{Name: "p"}}, Tree: "t", Why: "w"}
	conflict := cellOutcome{ID: "c", Status: image.StatusFailed, Code: exitCodeOf(prob)}
	other := cellOutcome{ID: "o", Status: image.StatusFailed, Code: exitCodeOf(errors.New("x"))}
	ok := cellOutcome{ID: "k", Status: image.StatusBuilt}
	pruned := cellOutcome{ID: "p", Status: statusPruned}
	if err := cellsError([]cellOutcome{ok, pruned}); err != nil {
		t.Errorf("nothing failed: %v", err)
	}
	if err := cellsError([]cellOutcome{ok, other, conflict, pruned}); exitCodeOf(err) != exitConflict || err.Error() != "2 of 4 cells failed" {
		t.Errorf("a conflict: %v (exit %d)", err, exitCodeOf(err))
	}
	if err := cellsError([]cellOutcome{other, ok}); exitCodeOf(err) != exitFailure {
		t.Errorf("a failure: %v (exit %d)", err, exitCodeOf(err))
	}
}

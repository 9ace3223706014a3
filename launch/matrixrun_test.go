package launch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeRunMatrix(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.toml")
	src := "name = \"two\"\nproject = \"sglang\"\n[axes]\nn = [1, 2]\n[launch]\ncommand = [\"sh\", \"-c\", \"echo up; sleep 30\"]\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// RunMatrix refuses a runner kind that is none, naming it and the kinds,
// before anything is written.
func TestRunMatrixUnknownRunner(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	_, err := RunMatrix(context.Background(), MatrixRun{File: writeRunMatrix(t), Runner: "lsf", Options: Options{Out: out}})
	var ue *UnknownRunnerError
	if !errors.As(err, &ue) || err.Error() != `runner "lsf": want local, docker, slurm or kubernetes` {
		t.Fatalf("err = %v, want an UnknownRunnerError naming the runner and the kinds", err)
	}
	if _, serr := os.Stat(out); !os.IsNotExist(serr) {
		t.Fatalf("out was created: %v", serr)
	}
}

// A dry run expands the file and plans each cell, with Out from
// ResultsDir and the matrix's name, starting and writing nothing.
func TestRunMatrixDryRun(t *testing.T) {
	results := filepath.Join(t.TempDir(), "results")
	res, err := RunMatrix(context.Background(), MatrixRun{File: writeRunMatrix(t), Runner: "local", ResultsDir: results, DryRun: true,
		Options: Options{Only: []string{"n2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary != nil || res.DryRun == nil {
		t.Fatalf("dry run gave summary %v, plan %v", res.Summary, res.DryRun)
	}
	if want := filepath.Join(results, "two"); res.Out != want || res.DryRun.Out != want {
		t.Fatalf("out = %q / %q, want %q", res.Out, res.DryRun.Out, want)
	}
	var got []string
	for _, c := range res.DryRun.Cells {
		got = append(got, c.ID+":"+c.Action)
	}
	if strings.Join(got, " ") != "n1:skipped n2:run" {
		t.Fatalf("cells = %v", got)
	}
	if _, serr := os.Stat(results); !os.IsNotExist(serr) {
		t.Fatalf("the dry run wrote %s: %v", results, serr)
	}
}

func TestParseRunnerKind(t *testing.T) {
	for _, k := range RunnerKinds() {
		if got, err := ParseRunnerKind(string(k)); err != nil || got != k {
			t.Errorf("ParseRunnerKind(%q) = %q, %v", k, got, err)
		}
	}
	for _, bad := range []string{"", "podman", "Local", " local"} {
		_, err := ParseRunnerKind(bad)
		var ue *UnknownRunnerError
		if !errors.As(err, &ue) || ue.Name != bad || !strings.HasSuffix(err.Error(), ": want local, docker, slurm or kubernetes") {
			t.Errorf("ParseRunnerKind(%q): %v", bad, err)
		}
	}
}

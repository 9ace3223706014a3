package launch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/smpatch/smpatch/internal/confined"
)

func quickCell(id string) *Cell {
	return &Cell{ID: id, Command: []string{"sh", "-c", "echo 'Output token throughput (tok/s): 1'"}}
}

// A second run into a results directory another run holds is refused
// before anything is written: its rows would be recorded twice, its logs
// would overwrite the other's, and docker's "rm -f NAME" would kill the
// other's container.
func TestRunRefusesBusyResults(t *testing.T) {
	o := testOptions(t)
	first, err := holdOut(o.Out)
	if err != nil {
		t.Fatal(err)
	}
	defer first.close()
	before := snapshot(t, o.Out)
	_, err = Run(context.Background(), []*Cell{quickCell("a")}, o)
	var be *OutBusyError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "another smpatch matrix run (pid ") {
		t.Fatalf("err = %v", err)
	}
	assertSameTree(t, before, snapshot(t, o.Out))
	first.close()
	if _, err := Run(context.Background(), []*Cell{quickCell("a")}, o); err != nil {
		t.Fatalf("once the first run is done: %v", err)
	}
}

// A non-empty directory smpatch never wrote is refused, untouched: a
// user's own results.md and logs would be replaced.
func TestRunRefusesForeignDirectory(t *testing.T) {
	o := testOptions(t)
	os.WriteFile(filepath.Join(o.Out, ResultsMD), []byte("my notes\n"), 0o644)
	before := snapshot(t, o.Out)
	_, err := Run(context.Background(), []*Cell{quickCell("a")}, o)
	var ne *NotResultsError
	if !errors.As(err, &ne) {
		t.Fatalf("err = %v", err)
	}
	assertSameTree(t, before, snapshot(t, o.Out))
}

// A results directory holding symbolic links (a folder from elsewhere for
// --resume, a shared scratch folder) is refused before anything is
// written, and no file is ever written through one: their targets outside
// stay as they were.
func TestRunNeverWritesThroughLinks(t *testing.T) {
	outside := t.TempDir()
	bashrc := filepath.Join(outside, "bashrc")
	keys := filepath.Join(outside, "authorized_keys")
	os.WriteFile(bashrc, []byte("mine\n"), 0o644)
	os.WriteFile(keys, []byte("ssh-ed25519 mine\n"), 0o644)
	for _, plant := range []func(out string){
		func(out string) {
			os.MkdirAll(filepath.Join(out, LogsDir), 0o755)
			os.Symlink(bashrc, filepath.Join(out, LogsDir, "a.log"))
		},
		func(out string) {
			os.MkdirAll(filepath.Join(out, CellsDir, "a"), 0o755)
			os.Symlink(keys, filepath.Join(out, CellsDir, "a", "run.sh"))
		},
		func(out string) { os.Symlink(outside, filepath.Join(out, CellsDir)) },
		func(out string) { os.Symlink(bashrc, filepath.Join(out, ResultsCSV)) },
	} {
		o := testOptions(t)
		os.WriteFile(filepath.Join(o.Out, ResultsMarker), []byte(resultsMarkerText), 0o644)
		plant(o.Out)
		o.Resume = true
		_, err := Run(context.Background(), []*Cell{{ID: "a", Command: []string{"true"}, Files: map[string][]byte{"run.sh": []byte("true\n")}}}, o)
		var ee *confined.EntryError
		if !errors.As(err, &ee) || ee.Kind != "a symbolic link" {
			t.Errorf("err = %v", err)
		}
	}
	if b, _ := os.ReadFile(bashrc); string(b) != "mine\n" {
		t.Errorf("bashrc: %q", b)
	}
	if b, _ := os.ReadFile(keys); string(b) != "ssh-ed25519 mine\n" {
		t.Errorf("authorized_keys: %q", b)
	}
}

// A cell whose server daemonizes (setsid) does not outlive the run: it
// would hold the GPUs and the port, and the next run's cells would fail
// "health URL answers already".
func TestRunEndsDaemonizedServer(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	o := testOptions(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	c := &Cell{ID: "d", Command: []string{"sh", "-c", "setsid sleep 60 & echo $! > " + pidFile + "; echo 'Output token throughput (tok/s): 1'"}}
	s, err := Run(context.Background(), []*Cell{c}, o)
	if err != nil || s.OK != 1 {
		t.Fatalf("%v %+v", err, s.Results[0])
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if !gone(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the daemonized server %d outlived the run", pid)
	}
}

// run.sh's own lines ("cell ID: log ...", "cell ID: exit 1") are marked as
// smpatch's in the cell's log: triage never quotes them as the server's
// last words or as the evidence of a failure.
func TestRunScriptLinesNotEvidence(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	p := filepath.Join(t.TempDir(), "m.toml")
	os.WriteFile(p, []byte("name = \"x\"\n[axes]\nn = [1]\n[launch]\ncommand = [\"sh\", \"-c\", \"echo the server said this; exit 1\"]\n"), 0o644)
	res, err := RunMatrix(context.Background(), MatrixRun{File: p, Runner: RunnerLocal, Options: Options{Out: filepath.Join(t.TempDir(), "out")}})
	var cf *CellsFailedError
	if !errors.As(err, &cf) {
		t.Fatalf("err = %v", err)
	}
	r := res.Summary.Results[0]
	if r.LastLine == nil || r.LastLine.Text != "the server said this" {
		t.Errorf("last line %+v", r.LastLine)
	}
	for _, l := range r.Tail {
		if strings.HasPrefix(l, "cell ") {
			t.Errorf("run.sh's line unmarked in the tail: %q", l)
		}
	}
	log, _ := os.ReadFile(r.Log)
	if !strings.Contains(string(log), NotePrefix+"cell n1: exit 1\n") {
		t.Errorf("log:\n%s", log)
	}
}

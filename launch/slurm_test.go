package launch

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Shaped like squeue --json of Slurm 22.05: plain numbers, a null task id
// for the pending rest of an array, the wait status as exit_code.
const squeue2205 = `{"meta": {"Slurm": {"release": "22.05.8"}}, "errors": [], "jobs": [
 {"job_id": 13, "array_job_id": 12, "array_task_id": 0, "array_task_string": "", "job_state": "COMPLETED", "state_reason": "None", "exit_code": 0, "nodes": "n1"},
 {"job_id": 14, "array_job_id": 12, "array_task_id": 1, "array_task_string": "", "job_state": "FAILED", "state_reason": "NonZeroExitCode", "exit_code": 1536, "nodes": "n1"},
 {"job_id": 15, "array_job_id": 12, "array_task_id": 2, "job_state": "CANCELLED", "exit_code": 15, "nodes": "n1"},
 {"job_id": 12, "array_job_id": 12, "array_task_id": null, "array_task_string": "3-7%1", "job_state": "PENDING", "state_reason": "JobArrayTaskLimit", "exit_code": 0, "nodes": ""}
]}`

// Shaped like Slurm 23.11 and later: state lists, {set, number} numbers,
// exit code objects.
const squeue2311 = `{"jobs": [
 {"job_id": 21, "array_job_id": {"set": true, "infinite": false, "number": 20}, "array_task_id": {"set": true, "number": 4},
  "job_state": ["TIMEOUT"], "state_reason": "None", "nodes": "gpu-a",
  "exit_code": {"status": ["SIGNALED"], "return_code": {"set": true, "number": 0}, "signal": {"id": {"set": true, "number": 9}, "name": "KILL"}}},
 {"job_id": 20, "array_job_id": {"set": true, "number": 20}, "array_task_id": {"set": false, "number": 0}, "array_task_string": "5,7-9",
  "job_state": ["PENDING"], "state_reason": "Resources"}
]}`

func TestParseSqueueJSON(t *testing.T) {
	got, err := ParseSqueueJSON([]byte(squeue2205))
	if err != nil {
		t.Fatal(err)
	}
	want := []SqueueTask{
		{JobID: "13", ArrayJobID: "12", Task: 0, State: "COMPLETED", Reason: "None", Exit: "exit 0", Node: "n1"},
		{JobID: "14", ArrayJobID: "12", Task: 1, State: "FAILED", Reason: "NonZeroExitCode", Exit: "exit 6", Node: "n1"},
		{JobID: "15", ArrayJobID: "12", Task: 2, State: "CANCELLED", Exit: "signal 15", Node: "n1"},
		{JobID: "12", ArrayJobID: "12", Task: -1, TaskRange: "3-7%1", State: "PENDING", Reason: "JobArrayTaskLimit"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d tasks, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("task %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	got, err = ParseSqueueJSON([]byte(squeue2311))
	if err != nil {
		t.Fatal(err)
	}
	if g := got[0]; g.ArrayJobID != "20" || g.Task != 4 || g.State != "TIMEOUT" || g.Exit != "signal 9" || g.Node != "gpu-a" {
		t.Errorf("23.11 task: %+v", g)
	}
	if g := got[1]; g.Task != -1 || g.TaskRange != "5,7-9" || g.State != "PENDING" || g.Reason != "Resources" {
		t.Errorf("23.11 pending rest: %+v", g)
	}
	for _, bad := range []string{`{`, `{"jobs": [{"array_task_id": 1}]}`} {
		if _, err := ParseSqueueJSON([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestInTaskRange(t *testing.T) {
	for _, tc := range []struct {
		spec string
		i    int
		want bool
	}{
		{"3-7%1", 3, true}, {"3-7%1", 7, true}, {"3-7%1", 8, false}, {"3-7%1", 2, false},
		{"5,7-9", 5, true}, {"5,7-9", 6, false}, {"5,7-9", 8, true}, {"0-9:2", 4, true}, {"x", 0, false},
	} {
		if got := inTaskRange(tc.spec, tc.i); got != tc.want {
			t.Errorf("inTaskRange(%q, %d) = %v", tc.spec, tc.i, got)
		}
	}
}

func TestParseSacct(t *testing.T) {
	got := ParseSacct([]byte("41|COMPLETED|0:0|n1\n42|CANCELLED by 0|0:15|n1\n43|FAILED|6:0|n2\nbroken line\n|x|y|z\n"))
	want := map[string]SacctRecord{
		"41": {"41", "COMPLETED", "exit 0", "n1"},
		"42": {"42", "CANCELLED", "signal 15", "n1"},
		"43": {"43", "FAILED", "exit 6", "n2"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %+v, want %+v", k, got[k], w)
		}
	}
}

func FuzzParseSqueueJSON(f *testing.F) {
	f.Add([]byte(squeue2205))
	f.Add([]byte(squeue2311))
	f.Add([]byte(`{"jobs": [{"job_id": 1, "exit_code": {"signal": {"id": 9}}, "job_state": []}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tasks, err := ParseSqueueJSON(data)
		if err != nil {
			return
		}
		for _, tk := range tasks {
			if tk.JobID == "" || tk.Task < -1 {
				t.Fatalf("bad task %+v", tk)
			}
			_ = inTaskRange(tk.TaskRange, 3)
		}
	})
}

func FuzzParseSacct(f *testing.F) {
	f.Add([]byte("41|COMPLETED|0:0|n1\n42|CANCELLED by 0|0:15|n1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for k, r := range ParseSacct(data) {
			if k == "" || k != r.JobID || strings.Contains(k, "|") {
				t.Fatalf("bad record %q %+v", k, r)
			}
		}
	})
}

// The array script runs the cell of its task index on the node with the
// local runner, whatever characters the paths and ids hold.
func TestArrayScript(t *testing.T) {
	s := Slurm{Command: []string{"/opt/my tools/smpatch", "matrix", "run", "/m/it's.toml"}}
	got := string(s.ArrayScript("/out/slurm", []string{"a.b", "y"}))
	for _, want := range []string{
		"cells=(\n  a.b\n  y\n)\n",
		"id=${cells[$SLURM_ARRAY_TASK_ID]}\n",
		`exec '/opt/my tools/smpatch' matrix run '/m/it'\''s.toml' --runner local --only "$id" --out "$dir"` + "\n",
		"unset GITHUB_STEP_SUMMARY\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("script lacks %q:\n%s", want, got)
		}
	}
	o := &Options{StartupTimeout: 20 * time.Second, BenchTimeout: 20 * time.Second, StopGrace: 10 * time.Second, Concurrency: 2, Name: "story fake"}
	args := strings.Join(s.SbatchArgs("/out/slurm", "/out/slurm/a.sh", o.Name, 6, 8, o), " ")
	for _, want := range []string{"--array=0-5%2", "--gres=gpu:8", "--time=3", "--job-name=smpatch-story_fake", "--output=/out/slurm/%A_%a.out"} {
		if !strings.Contains(args, want) {
			t.Errorf("sbatch args lack %s: %s", want, args)
		}
	}
}

// A task that died before its smpatch wrote a result fails with Slurm's
// state, and its output is triaged.
func TestSlurmCollectWithoutResult(t *testing.T) {
	out := t.TempDir()
	base := filepath.Join(out, SlurmDir)
	if err := os.MkdirAll(filepath.Join(out, LogsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(base, "7_1.out"), []byte("slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME LIMIT ***\n"), 0o644)
	o := &Options{Out: out}
	o.defaults()
	od, err := holdOut(out)
	if err != nil {
		t.Fatal(err)
	}
	defer od.close()
	o.out = od
	c := &Cell{ID: "c1"}
	r := Slurm{}.collect(base, &slurmTask{cell: c, array: "7", index: 1, job: "9", state: "TIMEOUT", exit: "signal 9", node: "n1"}, o)
	if r.Status != StatusFailed || r.Reason != "slurm job 7_1 (job 9) on n1: TIMEOUT, signal 9" {
		t.Fatalf("got %s %q", r.Status, r.Reason)
	}
	if len(r.Tail) == 0 || !strings.Contains(r.Tail[len(r.Tail)-1], "DUE TO TIME LIMIT") {
		t.Errorf("tail %q", r.Tail)
	}
	data, _ := os.ReadFile(r.Log)
	if !bytes.Contains(data, []byte("### smpatch: task: slurmstepd: error:")) {
		t.Errorf("log:\n%s", data)
	}
}

// A results directory whose name holds line breaks and shell text
// ("r\ntouch PWNED\n#", from --out) never runs as a command in the array
// script: not from the comment that names it, not from the quoted paths.
func TestArrayScriptHostileOut(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	work := t.TempDir()
	base := filepath.Join(work, "r\ntouch PWNED\n#", SlurmDir)
	echo := filepath.Join(work, "echo-args")
	os.WriteFile(echo, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$(dirname \"$0\")/args\"\n"), 0o755)
	s := Slurm{Command: []string{echo, "matrix", "run", "m'; touch PWNED2; #.toml"}}
	// The run refuses such a directory before anything is submitted...
	o := &Options{Out: filepath.Dir(base)}
	o.defaults()
	err = s.RunBatch(context.Background(), []*Cell{{ID: "a.b"}}, o, func(*Cell, *Result) error { return nil })
	if err == nil || !strings.HasPrefix(err.Error(), "slurm runner: the results directory ") || !strings.Contains(err.Error(), `r\ntouch PWNED\n#" holds a control character`) {
		t.Errorf("RunBatch: %v", err)
	}
	// ...and the script quotes it, comment included, all the same.
	script := s.ArrayScript(base, []string{"a.b"})
	if !strings.Contains(string(script), `# revert) and leaves its result and log in `+filepath.Join(work, `r\ntouch PWNED\n#`, SlurmDir, "tasks", "ID")+".\n") {
		t.Errorf("the comment:\n%s", script)
	}
	p := filepath.Join(work, "array.sh")
	os.WriteFile(p, script, 0o755)
	cmd := exec.Command(bash, p)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "SLURM_ARRAY_TASK_ID=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, f := range []string{"PWNED", "PWNED2"} {
		if _, err := os.Stat(filepath.Join(work, f)); err == nil {
			t.Errorf("%s was created: the script ran text from a path", f)
		}
	}
	args, _ := os.ReadFile(filepath.Join(work, "args"))
	want := "matrix\nrun\nm'; touch PWNED2; #.toml\n--runner\nlocal\n--only\na.b\n--out\n" + filepath.Join(base, "tasks", "a.b") + "\n"
	if string(args) != want {
		t.Errorf("args %q, want %q", args, want)
	}
}

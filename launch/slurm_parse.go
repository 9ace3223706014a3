package launch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// SqueueTask is one entry of squeue --json: a task of an array, or the
// pending rest of one (Task -1, TaskRange "3-7%1").
type SqueueTask struct {
	JobID      string
	ArrayJobID string
	Task       int
	TaskRange  string
	State      string
	Reason     string
	Exit       string // "exit 1", "signal 9"; "" while it runs
	Node       string
}

// ParseSqueueJSON reads squeue --json as Slurm 22.05 (plain numbers and
// strings) and later releases (state lists, {set, number} numbers, exit
// code objects) write it.
func ParseSqueueJSON(data []byte) ([]SqueueTask, error) {
	var doc struct {
		Jobs []map[string]json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("squeue --json: %w", err)
	}
	var out []SqueueTask
	for _, j := range doc.Jobs {
		t := SqueueTask{Task: -1}
		if n, ok := slurmNumber(j["job_id"]); ok {
			t.JobID = strconv.FormatInt(n, 10)
		} else {
			return nil, fmt.Errorf("squeue --json: a job without a job_id")
		}
		if n, ok := slurmNumber(j["array_job_id"]); ok && n > 0 {
			t.ArrayJobID = strconv.FormatInt(n, 10)
		}
		if n, ok := slurmNumber(j["array_task_id"]); ok && n >= 0 && n < 1<<31 {
			t.Task = int(n)
		}
		t.TaskRange = slurmString(j["array_task_string"])
		t.State = slurmState(j["job_state"])
		t.Reason = slurmString(j["state_reason"])
		t.Node = slurmString(j["nodes"])
		if slurmFinal(t.State) {
			t.Exit = slurmExit(j["exit_code"])
		}
		out = append(out, t)
	}
	return out, nil
}

// slurmNumber reads 5, or {"set": true, "number": 5} (Slurm 23.02 on).
func slurmNumber(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false
	}
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		return n, true
	}
	var o struct {
		Set      *bool `json:"set"`
		Infinite bool  `json:"infinite"`
		Number   int64 `json:"number"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Set != nil && *o.Set && !o.Infinite {
		return o.Number, true
	}
	return 0, false
}

func slurmString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// slurmState reads "RUNNING" or ["RUNNING", "COMPLETING"] (the first names
// the state, the rest are flags).
func slurmState(raw json.RawMessage) string {
	if s := slurmString(raw); s != "" {
		return s
	}
	var l []string
	if json.Unmarshal(raw, &l) == nil && len(l) > 0 {
		return l[0]
	}
	return ""
}

// slurmExit reads a wait status (256 is exit 1, 9 is signal 9) or
// {"status": [...], "return_code": N, "signal": {"id": N}}.
func slurmExit(raw json.RawMessage) string {
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		if sig := n & 0x7f; sig != 0 {
			return "signal " + strconv.FormatInt(sig, 10)
		}
		return "exit " + strconv.FormatInt((n>>8)&0xff, 10)
	}
	var o struct {
		ReturnCode json.RawMessage `json:"return_code"`
		Signal     struct {
			ID json.RawMessage `json:"id"`
		} `json:"signal"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return ""
	}
	if sig, ok := slurmNumber(o.Signal.ID); ok && sig != 0 {
		return "signal " + strconv.FormatInt(sig, 10)
	}
	if rc, ok := slurmNumber(o.ReturnCode); ok {
		return "exit " + strconv.FormatInt(rc, 10)
	}
	return ""
}

// SacctRecord is one line of sacct -P --format=JobID,State,ExitCode,NodeList.
type SacctRecord struct {
	JobID, State, Exit, Node string
}

// ParseSacct reads sacct -n -P --format=JobID,State,ExitCode,NodeList
// (parsable, no header), keyed by job id. "CANCELLED by 0" is CANCELLED;
// exit code "1:0" is "exit 1", "0:9" is "signal 9". Lines that do not
// have four fields are left out.
func ParseSacct(data []byte) map[string]SacctRecord {
	recs := map[string]SacctRecord{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), "|")
		if len(f) < 4 || f[0] == "" {
			continue
		}
		rec := SacctRecord{JobID: f[0], Node: f[3]}
		rec.State, _, _ = strings.Cut(f[1], " ")
		if code, sig, ok := strings.Cut(f[2], ":"); ok {
			if sig != "0" && sig != "" {
				rec.Exit = "signal " + sig
			} else {
				rec.Exit = "exit " + code
			}
		}
		recs[rec.JobID] = rec
	}
	return recs
}

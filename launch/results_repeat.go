package launch

import (
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
)

// Sample is one repeat of a cell: one server process from start to stop.
type Sample struct {
	Repeat         int                `json:"repeat"` // 1-based
	Status         Status             `json:"status"`
	Reason         string             `json:"reason,omitempty"`
	Started        string             `json:"started,omitempty"`
	Seconds        float64            `json:"seconds"`
	HealthySeconds *float64           `json:"healthy_seconds,omitempty"`
	Metrics        map[string]float64 `json:"metrics,omitempty"`
	Triage         *Match             `json:"triage,omitempty"`
	LastLine       *LogLine           `json:"last_line,omitempty"`
	Log            string             `json:"log,omitempty"`
}

// Environment variables the runner gives each repeat's server process.
const (
	EnvCell   = "SMPATCH_CELL"
	EnvRepeat = "SMPATCH_REPEAT"
)

// forRepeat returns the cell as repeat k of n: its own log name
// (ID.rK.log) and SMPATCH_CELL / SMPATCH_REPEAT in its environment.
func forRepeat(c *Cell, k, n int) *Cell {
	if n <= 1 {
		return c
	}
	cc := *c
	cc.repeat = k
	cc.Env = maps.Clone(c.Env)
	if cc.Env == nil {
		cc.Env = map[string]string{}
	}
	cc.Env[EnvCell] = c.ID
	cc.Env[EnvRepeat] = strconv.Itoa(k)
	return &cc
}

// logName is the cell's log file under the results directory.
func logName(c *Cell) string {
	if c.repeat > 0 {
		return fmt.Sprintf("%s.r%d.log", c.ID, c.repeat)
	}
	return c.ID + ".log"
}

// addSample folds repeat r of a cell into agg, the cell's result over its
// repeats so far, and returns the new aggregate.
func addSample(agg *Result, r *Result, repeat int) *Result {
	s := Sample{Repeat: repeat, Status: r.Status, Reason: r.Reason, Started: r.Started, Seconds: r.Seconds,
		HealthySeconds: r.HealthySeconds, Metrics: r.Metrics, Triage: r.Triage, LastLine: r.LastLine, Log: r.Log}
	if agg == nil || agg.Status == "" || len(agg.Samples) == 0 {
		out := *r
		out.Samples = []Sample{s}
		out.aggregate()
		return &out
	}
	out := *agg
	out.Samples = append(slices.Clone(agg.Samples), s)
	if out.Tail == nil && r.Status == StatusFailed {
		out.Tail = r.Tail
	}
	out.aggregate()
	return &out
}

// aggregate sets a result's fields from its samples: ok only when every
// repeat was; the first failure's reason and triage; each metric's median
// over the repeats that finished, and its statistics.
func (r *Result) aggregate() {
	if len(r.Samples) == 0 {
		return
	}
	first := r.Samples[0]
	r.Started, r.Log = first.Started, first.Log
	r.Status, r.Reason, r.Triage, r.LastLine = StatusOK, "", nil, nil
	r.Seconds = 0
	var healthy []float64
	values := map[string][]float64{}
	for _, s := range r.Samples {
		r.Seconds += s.Seconds
		if s.HealthySeconds != nil {
			healthy = append(healthy, *s.HealthySeconds)
		}
		if s.Status != StatusOK {
			if r.Status == StatusOK {
				r.Status = s.Status
				r.Reason = fmt.Sprintf("repeat %d of %d: %s", s.Repeat, len(r.Samples), s.Reason)
				r.Triage, r.LastLine, r.Log = s.Triage, s.LastLine, s.Log
			}
			continue
		}
		for k, v := range s.Metrics {
			values[k] = append(values[k], v)
		}
	}
	r.Seconds = math.Round(r.Seconds*1000) / 1000
	r.HealthySeconds = nil
	if st := ComputeStat(healthy); st != nil {
		h := st.Median
		r.HealthySeconds = &h
	}
	r.Metrics, r.Stats = nil, nil
	for k, vs := range values {
		st := ComputeStat(vs)
		if r.Metrics == nil {
			r.Metrics, r.Stats = map[string]float64{}, map[string]*Stat{}
		}
		r.Metrics[k] = st.Median
		r.Stats[k] = st
	}
}

// values returns a metric's samples over the repeats that finished ok (the
// one value of a cell run once).
func (r *Result) values(metric string) []float64 {
	if len(r.Samples) == 0 {
		if v, ok := r.Metrics[metric]; ok && r.Status == StatusOK {
			return []float64{v}
		}
		return nil
	}
	var out []float64
	for _, s := range r.Samples {
		if v, ok := s.Metrics[metric]; ok && s.Status == StatusOK {
			out = append(out, v)
		}
	}
	return out
}

// repeatLogPath is where repeat k of cell id logs, under out.
func repeatLogPath(out string, c *Cell) string {
	return filepath.Join(out, LogsDir, logName(c))
}

package launch

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/termsafe"
	"github.com/smpatch/smpatch/internal/words"
)

// Alpha is the significance level of the A/B test: a difference is called
// when the two-sided Mann-Whitney U p-value is below it.
const Alpha = 0.05

// Comparison is one A/B verdict: cell A against cell B (the reference) on
// one metric.
type Comparison struct {
	A      string `json:"a"`
	B      string `json:"b"` // the reference
	Label  string `json:"label"`
	Metric string `json:"metric"`
	NA     int    `json:"n_a"`
	NB     int    `json:"n_b"`
	// MedianA and MedianB are the metric's medians over each cell's repeats.
	MedianA float64 `json:"median_a"`
	MedianB float64 `json:"median_b"`
	// ChangePct is median(A)/median(B) - 1, in percent; CILoPct and CIHiPct
	// its percentile-bootstrap 95% interval (4,000 resamples, seeded).
	ChangePct float64 `json:"change_pct"`
	CILoPct   float64 `json:"ci_lo_pct"`
	CIHiPct   float64 `json:"ci_hi_pct"`
	// P is the two-sided Mann-Whitney U p-value (exact without ties); NaN
	// (omitted) with fewer than two runs on a side.
	P *float64 `json:"p,omitempty"`
	// Distinguishable is true when P < Alpha: the difference is not noise.
	Distinguishable bool   `json:"distinguishable"`
	Text            string `json:"text"` // the verdict in words
}

// ComparePair compares cell a against cell b on metric.
func (s *Summary) ComparePair(a, b, metric string) (*Comparison, error) {
	ra, rb := s.result(a), s.result(b)
	switch {
	case ra == nil:
		return nil, fmt.Errorf("no cell %s in the results%s", a, s.hint(a))
	case rb == nil:
		return nil, fmt.Errorf("no cell %s in the results%s", b, s.hint(b))
	}
	va, vb := ra.values(metric), rb.values(metric)
	c := &Comparison{A: a, B: b, Label: pairLabel(ra, rb), Metric: metric, NA: len(va), NB: len(vb)}
	runs := words.Count(c.NA, "run each", "runs each")
	if c.NA != c.NB {
		runs = fmt.Sprintf("%d and %d runs", c.NA, c.NB)
	}
	if c.NA == 0 || c.NB == 0 {
		missing := a
		if c.NA > 0 {
			missing = b
		}
		c.Text = fmt.Sprintf("%s: %s: no %s from %s (%s)", c.Label, metric, metric, missing, statusOf(s.result(missing)))
		return c, nil
	}
	c.MedianA, c.MedianB = ComputeStat(va).Median, ComputeStat(vb).Median
	if c.MedianB == 0 {
		c.Text = fmt.Sprintf("%s: %s: the reference median is 0, no ratio", c.Label, metric)
		return c, nil
	}
	c.ChangePct = (c.MedianA/c.MedianB - 1) * 100
	lo, hi := BootstrapRatio(vb, va, a+"\x00"+b+"\x00"+metric)
	c.CILoPct, c.CIHiPct = (lo-1)*100, (hi-1)*100
	if math.IsNaN(lo) || math.IsNaN(hi) { // every resample of the reference had median 0
		c.CILoPct, c.CIHiPct = c.ChangePct, c.ChangePct
	}
	if c.NA < 2 || c.NB < 2 {
		c.Text = fmt.Sprintf("%s: %s, %s: no test with one run; repeat the cells (repeat = 5) to tell a difference from noise", c.Label, pct(c.ChangePct), runs)
		return c, nil
	}
	p := MannWhitney(va, vb)
	c.P = &p
	c.Distinguishable = p < Alpha
	verdict := "not distinguishable from noise"
	if c.Distinguishable {
		verdict = "distinguishable from noise"
	}
	c.Text = fmt.Sprintf("%s: %s [%s, %s], %s; Mann-Whitney U p = %s: %s", c.Label, pct(c.ChangePct), pct(c.CILoPct), pct(c.CIHiPct), runs, formatP(p), verdict)
	return c, nil
}

func statusOf(r *Result) string {
	if r.Reason != "" {
		return string(r.Status) + ": " + r.Reason
	}
	return string(r.Status)
}

func pct(x float64) string {
	if math.IsNaN(x) {
		return "?"
	}
	s := fmt.Sprintf("%+.1f", x)
	if s == "-0.0" {
		s = "+0.0"
	}
	return s + "%"
}

func formatP(p float64) string {
	if p < 0.001 {
		return "< 0.001"
	}
	return fmt.Sprintf("%.3f", p)
}

// pairLabel names a pair by the axis values that differ ("fewchan vs
// default"), or by the cell ids when every value is the same.
func pairLabel(a, b *Result) string {
	bv := map[string]string{}
	for _, v := range b.Values {
		bv[v.Axis] = v.Value
	}
	var da, db []string
	for _, v := range a.Values {
		if w, ok := bv[v.Axis]; ok && w != v.Value {
			da, db = append(da, v.Value), append(db, w)
		}
	}
	if len(da) == 0 {
		return a.ID + " vs " + b.ID
	}
	return strings.Join(da, ",") + " vs " + strings.Join(db, ",")
}

func (s *Summary) result(id string) *Result {
	for _, r := range s.Results {
		if r.ID == id {
			return r
		}
	}
	return nil
}

func (s *Summary) hint(id string) string {
	var close []string
	for _, r := range s.Results {
		if strings.Contains(r.ID, id) || strings.Contains(id, r.ID) {
			close = append(close, r.ID)
		}
	}
	if len(close) == 0 || len(close) > 5 {
		return ""
	}
	return " (did you mean " + strings.Join(close, ", ") + "?)"
}

// ComparePairs compares each pair ([A, B]: A against the reference B) on
// every metric of the run; with no pairs, every cell that ran against
// baseline (the run's own baseline when ""). It fails when no baseline is
// known or a cell is not in the results.
func (s *Summary) ComparePairs(pairs [][2]string, baseline string) ([]*Comparison, error) {
	if len(pairs) == 0 {
		if baseline == "" {
			baseline = s.Baseline
		}
		if baseline == "" {
			return nil, fmt.Errorf("the run has no baseline cell: name one (--baseline ID) or pairs (--pair A:B)")
		}
		if s.result(baseline) == nil {
			return nil, fmt.Errorf("baseline %s: no such cell in the results%s", baseline, s.hint(baseline))
		}
		for _, r := range s.Results {
			if r.ID != baseline && r.Finished() {
				pairs = append(pairs, [2]string{r.ID, baseline})
			}
		}
	}
	var out []*Comparison
	for _, p := range pairs {
		for _, m := range s.Metrics {
			c, err := s.ComparePair(p[0], p[1], m)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// MaxSummarySize bounds a results.json read by ReadSummary; a run of
// 65536 cells with repeats writes a few tens of MiB.
const MaxSummarySize = 256 << 20

// ReadSummary reads the results.json of a run: path is the file or the
// results directory.
func ReadSummary(path string) (*Summary, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, ResultsJSON)
	}
	// Results can come from elsewhere: a regular file, bounded (a link to
	// /dev/zero once grew until the machine ran out of memory).
	data, err := bounded.ReadFile(nil, path, MaxSummarySize)
	if err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: not a results.json: %w", path, err)
	}
	if s.Results == nil {
		return nil, fmt.Errorf("%s: not a results.json: no results", path)
	}
	return &s, nil
}

// compareMethod says how the verdicts are reached, under each A/B section.
const compareMethod = "Change: ratio of medians, 95% percentile-bootstrap interval (4,000 resamples); " +
	"verdict: two-sided Mann-Whitney U test (exact without ties), distinguishable when p < 0.05."

// WriteComparisonsText prints one verdict per line: the names in it (from
// a results.json that may come from elsewhere) have their control
// characters escaped, so that none starts a line of its own.
func WriteComparisonsText(w io.Writer, cs []*Comparison) {
	for _, c := range cs {
		fmt.Fprintf(w, "%s: %s\n", termsafe.Line(c.Metric), termsafe.Line(c.Text))
	}
	fmt.Fprintln(w, compareMethod)
}

// writeComparisonsMarkdown writes the A/B section of results.md: every
// cell against the baseline.
func (s *Summary) writeComparisonsMarkdown(w io.Writer) {
	if s.Baseline == "" || s.result(s.Baseline) == nil {
		return
	}
	cs := s.baselineComparisons()
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "A/B against `%s`:\n\n", mdEscape(s.Baseline))
	fmt.Fprintf(w, "| cell | metric | verdict |\n| --- | --- | --- |\n")
	for _, c := range cs {
		fmt.Fprintf(w, "| %s | %s | %s |\n", mdEscape(c.A), mdEscape(c.Metric), mdEscape(c.Text))
	}
	fmt.Fprintf(w, "\n%s\n\n", compareMethod)
}

// baselineComparisons are every cell against the baseline, computed once
// for all the files a run writes.
func (s *Summary) baselineComparisons() []*Comparison {
	if s.ab == nil {
		s.ab, _ = s.ComparePairs(nil, "")
		if s.ab == nil {
			s.ab = []*Comparison{}
		}
	}
	return s.ab
}

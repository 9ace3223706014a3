package launch

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/confined"
	"github.com/smpatch/smpatch/internal/junit"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Status is how a cell ended.
type Status string

const (
	StatusOK      Status = "ok"
	StatusFailed  Status = "failed"
	StatusPruned  Status = "pruned"  // a matrix rule removed it
	StatusSkipped Status = "skipped" // not selected (--only)
)

// Result is one cell's row in the results.
type Result struct {
	ID      string      `json:"id"`
	Values  []AxisValue `json:"values"`
	Patches []string    `json:"patches"`
	Status  Status      `json:"status"`
	// Reason says why a cell failed, was pruned or skipped.
	Reason string     `json:"reason,omitempty"`
	Runner RunnerKind `json:"runner,omitempty"`
	// Launch is the cell's server command line, shell-quoted.
	Launch string `json:"launch,omitempty"`
	// Started is when the cell started (RFC 3339); empty for cells not run.
	Started string `json:"started,omitempty"`
	// Seconds is the cell's wall time, start to stopped.
	Seconds float64 `json:"seconds"`
	// HealthySeconds is the time from start to the first healthy answer.
	HealthySeconds *float64           `json:"healthy_seconds,omitempty"`
	Metrics        map[string]float64 `json:"metrics,omitempty"`
	// Stats summarise each metric over the cell's repeats (matrix repeat > 1).
	Stats map[string]*Stat `json:"stats,omitempty"`
	// Samples are the cell's repeats, each a fresh server process, in the
	// order they ran; Metrics then holds each metric's median.
	Samples []Sample `json:"samples,omitempty"`
	// DeltaPct is each metric's change against the baseline cell, in percent.
	DeltaPct map[string]float64 `json:"delta_pct,omitempty"`
	// Triage is the log's first fatal line, for a failed cell.
	Triage *Match `json:"triage,omitempty"`
	// Tail is the last lines of the log of a failed cell no signature named.
	Tail []string `json:"tail,omitempty"`
	// LastLine is the server's own last line in the log of a failed cell
	// no signature named (smpatch's notes left out).
	LastLine *LogLine `json:"last_line,omitempty"`
	Log      string   `json:"log,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// Resumed is set when the row was carried over from an earlier run.
	Resumed bool `json:"resumed,omitempty"`
}

// Finished reports whether the cell ran to an end (ok or failed).
func (r *Result) Finished() bool { return r.Status == StatusOK || r.Status == StatusFailed }

// Summary is a whole run.
type Summary struct {
	Name     string     `json:"name"`
	Runner   RunnerKind `json:"runner"`
	Baseline string     `json:"baseline,omitempty"`
	Metrics  []string   `json:"metrics"`
	// Meta says when, where and with what the run happened.
	Meta *RunMeta `json:"meta,omitempty"`
	// Repeat is how many times each cell ran (a fresh server each time).
	Repeat  int       `json:"repeat,omitempty"`
	Results []*Result `json:"results"`
	OK      int       `json:"ok"`
	Failed  int       `json:"failed"`
	Pruned  int       `json:"pruned"`
	Skipped int       `json:"skipped"`
	// Interrupted is set when the run was stopped before every cell ran.
	Interrupted bool `json:"interrupted,omitempty"`

	ab []*Comparison // every cell against the baseline, once computed
}

func (s *Summary) count() {
	s.OK, s.Failed, s.Pruned, s.Skipped = 0, 0, 0, 0
	for _, r := range s.Results {
		switch r.Status {
		case StatusOK:
			s.OK++
		case StatusFailed:
			s.Failed++
		case StatusPruned:
			s.Pruned++
		case StatusSkipped:
			s.Skipped++
		}
	}
}

// computeDeltas fills DeltaPct against the baseline cell, when it ran ok.
func (s *Summary) computeDeltas() {
	var base *Result
	for _, r := range s.Results {
		r.DeltaPct = nil
		if r.ID == s.Baseline && r.Status == StatusOK {
			base = r
		}
	}
	if base == nil {
		return
	}
	for _, r := range s.Results {
		if r == base || r.Status != StatusOK {
			continue
		}
		for name, v := range r.Metrics {
			b, ok := base.Metrics[name]
			if !ok || b == 0 {
				continue
			}
			if r.DeltaPct == nil {
				r.DeltaPct = map[string]float64{}
			}
			r.DeltaPct[name] = math.Round((v-b)/b*1000) / 10
		}
	}
}

// File names in the results directory.
const (
	ResultsJSONL = "results.jsonl"
	ResultsJSON  = "results.json"
	ResultsCSV   = "results.csv"
	ResultsMD    = "results.md"
	ResultsJUnit = "junit.xml"
	LogsDir      = "logs"
	CellsDir     = "cells" // per cell, the rendered run.sh, env and sitecustomize.py the local runner started
)

// readJSONL reads the results an earlier run appended, path in fsys (the
// file system when nil); the last line for a cell wins. A torn last line
// (a run killed mid-write) is ignored.
func readJSONL(fsys fs.FS, path string) (map[string]*Result, error) {
	// A regular file, bounded like results.json (a link to /dev/zero must
	// not grow until memory runs out).
	data, err := bounded.ReadFile(fsys, path, MaxSummarySize)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]*Result{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]*Result{}
	lines := bytes.Split(data, []byte("\n"))
	for i, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var r Result
		if err := json.Unmarshal(l, &r); err != nil {
			if i == len(lines)-1 {
				break // torn last line
			}
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		if r.ID == "" {
			return nil, fmt.Errorf("%s:%d: result without an id", path, i+1)
		}
		out[r.ID] = &r
	}
	return out, nil
}

// repairTail makes results.jsonl end with a whole line before --resume
// appends to it: a last line a crash left without its newline gets one
// when it is a whole result, and is cut when it is not (readJSONL skipped
// it, so its cell runs again). Otherwise the next result would be glued to
// it and the following --resume would stop at that line.
func repairTail(od *outDir) error {
	data, err := bounded.ReadFile(od.root.FS(), ResultsJSONL, MaxSummarySize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(data) == 0 || data[len(data)-1] == '\n' {
		return nil
	}
	i := bytes.LastIndexByte(data, '\n') + 1
	var r Result
	if json.Unmarshal(data[i:], &r) == nil && r.ID != "" {
		data = append(data, '\n')
	} else {
		data = data[:i]
	}
	return od.writeFile(ResultsJSONL, data, 0o644)
}

// ReadResults reads the results an earlier run left in dir's results.jsonl
// (cell id -> its last result); an absent file is no results.
func ReadResults(dir string) (map[string]*Result, error) {
	return readJSONL(nil, filepath.Join(dir, ResultsJSONL))
}

// appendJSONL appends one result as a line to results.jsonl and syncs it.
func appendJSONL(od *outDir, r *Result) error {
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := od.appendTo(ResultsJSONL)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// WriteFiles writes results.json, results.csv, results.md and junit.xml into
// dir, each atomically, and appends the markdown to stepSummary when set.
// Nothing is written through a symbolic link found in dir.
func (s *Summary) WriteFiles(dir, stepSummary string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := s.writeFiles(root); err != nil {
		return err
	}
	if stepSummary != "" {
		var md bytes.Buffer
		s.WriteMarkdown(&md)
		return appendStepSummary(stepSummary, md.Bytes())
	}
	return nil
}

// writeFiles writes the results files into the directory root is.
func (s *Summary) writeFiles(root *os.Root) error {
	s.ab = nil // the results may have changed since the last write
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	var c, md, ju, ht bytes.Buffer
	if err := s.WriteCSV(&c); err != nil {
		return err
	}
	s.WriteMarkdown(&md)
	if err := s.WriteJUnit(&ju); err != nil {
		return err
	}
	if err := s.WriteHTML(&ht); err != nil {
		return err
	}
	for name, data := range map[string][]byte{ResultsJSON: js.Bytes(), ResultsCSV: c.Bytes(), ResultsMD: md.Bytes(), ResultsJUnit: ju.Bytes(), ResultsHTML: ht.Bytes()} {
		if err := confined.WriteFile(root, name, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// AppendStepSummary appends the markdown table to path ($GITHUB_STEP_SUMMARY).
func (s *Summary) AppendStepSummary(path string) error {
	var md bytes.Buffer
	s.WriteMarkdown(&md)
	return appendStepSummary(path, md.Bytes())
}

func appendStepSummary(path string, md []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("step summary: %w", err)
	}
	_, werr := f.Write(md)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		return fmt.Errorf("step summary: %w", werr)
	}
	return nil
}

func formatValues(vs []AxisValue) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		val := v.Value
		if val == "" {
			val = "[]"
		}
		parts[i] = v.Axis + "=" + val
	}
	return strings.Join(parts, " ")
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// round3 keeps 3 significant decimals for tables.
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func formatDelta(d float64) string {
	if d >= 0 {
		return "+" + strconv.FormatFloat(d, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(d, 'f', 1, 64) + "%"
}

func healthy(r *Result) string {
	if r.HealthySeconds == nil {
		return ""
	}
	return strconv.FormatFloat(*r.HealthySeconds, 'f', 1, 64) + "s"
}

// note is the triage label, or the reason, for the tables; line is empty
// when the label names no log line (a patch that did not apply).
func note(r *Result) (label, line string) {
	if r.Triage != nil {
		if r.Triage.Line == 0 {
			return r.Triage.Label, ""
		}
		return r.Triage.Label, fmt.Sprintf("line %d: %s", r.Triage.Line, r.Triage.Text)
	}
	if r.Status == StatusFailed && r.LastLine != nil {
		return "unknown", fmt.Sprintf("line %d: %s", r.LastLine.Line, r.LastLine.Text)
	}
	if r.Status == StatusFailed && len(r.Tail) > 0 {
		return "unknown", r.Tail[len(r.Tail)-1]
	}
	return "", ""
}

// WriteCSV writes one row per cell: fixed columns, then one column per axis,
// per metric and per metric delta.
func (s *Summary) WriteCSV(w io.Writer) error {
	axes := s.axes()
	cw := csv.NewWriter(w)
	head := []string{"id", "status", "reason", "healthy_seconds", "seconds", "triage", "triage_line", "log"}
	for _, a := range axes {
		head = append(head, "axis:"+a)
	}
	for _, m := range s.Metrics {
		head = append(head, m, m+"_delta_pct")
	}
	for i := range head {
		head[i] = csvText(head[i])
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range s.Results {
		label, line := note(r)
		hs := ""
		if r.HealthySeconds != nil {
			hs = formatFloat(*r.HealthySeconds)
		}
		row := []string{r.ID, string(r.Status), r.Reason, hs, formatFloat(r.Seconds), label, line, r.Log}
		vals := map[string]string{}
		for _, v := range r.Values {
			vals[v.Axis] = v.Value
		}
		for _, a := range axes {
			row = append(row, vals[a])
		}
		for _, m := range s.Metrics {
			v, d := "", ""
			if x, ok := r.Metrics[m]; ok {
				v = formatFloat(x)
			}
			if x, ok := r.DeltaPct[m]; ok {
				d = formatFloat(x)
			}
			row = append(row, v, d)
		}
		for i := range row {
			row[i] = csvText(row[i])
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// csvText keeps a cell from being read as a formula when results.csv is
// opened in a spreadsheet (OWASP's CSV injection advice): text starting
// with =, +, -, @, a tab or a carriage return gets a leading single quote.
// A number ("-3.5", a metric or its change) stays as it is.
func csvText(s string) string {
	if s == "" || strings.IndexByte("=+-@\t\r", s[0]) < 0 {
		return s
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return s
	}
	return "'" + s
}

func (s *Summary) axes() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range s.Results {
		for _, v := range r.Values {
			if !seen[v.Axis] {
				seen[v.Axis] = true
				out = append(out, v.Axis)
			}
		}
	}
	return out
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "`", "'")
	return s
}

// metricCells are a result's table cells for every metric: its value and,
// when the matrix has a baseline, the change against it.
func (s *Summary) metricCells(r *Result) []string {
	var cells []string
	for _, m := range s.Metrics {
		v := ""
		if x, ok := r.Metrics[m]; ok {
			v = formatFloat(x)
			if st := r.Stats[m]; st != nil && st.N > 1 {
				v = fmt.Sprintf("%s [%s, %s]", formatFloat(round3(st.Median)), formatFloat(round3(st.CILo)), formatFloat(round3(st.CIHi)))
			}
		}
		cells = append(cells, v)
		if s.Baseline != "" {
			d := ""
			if x, ok := r.DeltaPct[m]; ok {
				d = formatDelta(x)
			}
			cells = append(cells, d)
		}
	}
	return cells
}

// WriteMarkdown writes the results table.
func (s *Summary) WriteMarkdown(w io.Writer) {
	title := s.Name
	if title == "" {
		title = "matrix"
	}
	fmt.Fprintf(w, "### %s: %d ok, %d failed, %d pruned, %d skipped\n\n", mdEscape(title), s.OK, s.Failed, s.Pruned, s.Skipped)
	if lines := s.Meta.metaLines(s.Runner); len(lines) > 0 {
		parts := make([]string, len(lines))
		for i, l := range lines {
			parts[i] = l[0] + ": " + mdEscape(l[1])
		}
		fmt.Fprintf(w, "%s\n\n", strings.Join(parts, "; "))
	}
	head := []string{"cell", "values", "status", "healthy"}
	for _, m := range s.Metrics {
		head = append(head, m)
		if s.Baseline != "" {
			head = append(head, "Δ "+m)
		}
	}
	head = append(head, "triage", "log")
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(head, " | "), strings.Repeat(" --- |", len(head)))
	for _, r := range s.Results {
		id := mdEscape(r.ID)
		if r.ID == s.Baseline {
			id += " (baseline)"
		}
		status := string(r.Status)
		row := []string{id, mdEscape(formatValues(r.Values)), status, healthy(r)}
		row = append(row, s.metricCells(r)...)
		label, line := note(r)
		tri := ""
		switch {
		case label != "" && line == "":
			tri = "**" + mdEscape(label) + "**"
		case label != "":
			tri = "**" + mdEscape(label) + "** `" + mdEscape(truncate(line, 160)) + "`"
		case r.Reason != "":
			tri = mdEscape(r.Reason)
		}
		if label != "" && r.Reason != "" {
			tri = mdEscape(r.Reason) + ": " + tri
		}
		log := ""
		if r.Log != "" {
			log = "`" + mdEscape(r.Log) + "`"
		}
		row = append(row, tri, log)
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
	if s.Repeat > 1 {
		fmt.Fprintf(w, "Each cell ran %d times, a fresh server each time, round-robin over the cells; a metric is the median [distribution-free confidence interval of the median] of its runs.\n\n", s.Repeat)
	}
	s.writeComparisonsMarkdown(w)
	// Rule warnings (matrix rules with action warn) under the table, one
	// line per warning with the cells it is about, so the table's columns
	// stay as they are.
	var warnings []string
	cells := map[string][]string{}
	for _, r := range s.Results {
		for _, wn := range r.Warnings {
			if _, seen := cells[wn]; !seen {
				warnings = append(warnings, wn)
			}
			cells[wn] = append(cells[wn], "`"+mdEscape(r.ID)+"`")
		}
	}
	if len(warnings) > 0 {
		fmt.Fprintf(w, "Warnings:\n\n")
		for _, wn := range warnings {
			who := strings.Join(cells[wn], ", ")
			if n := len(cells[wn]); n > 1 && n == len(s.Results) {
				who = fmt.Sprintf("all %d cells", n)
			}
			fmt.Fprintf(w, "- %s: %s\n", who, mdEscape(wn))
		}
		fmt.Fprintln(w)
	}
}

// WriteText writes the results table for a terminal.
func (s *Summary) WriteText(w io.Writer) {
	head := []string{"CELL", "STATUS", "HEALTHY"}
	for _, m := range s.Metrics {
		head = append(head, m)
		if s.Baseline != "" {
			head = append(head, "Δ")
		}
	}
	head = append(head, "TRIAGE")
	rows := [][]string{head}
	for _, r := range s.Results {
		id := r.ID
		if r.ID == s.Baseline {
			id += "*"
		}
		row := []string{id, string(r.Status), healthy(r)}
		row = append(row, s.metricCells(r)...)
		label, line := note(r)
		switch {
		case label != "" && line == "" && r.Reason != "":
			row = append(row, label+" ("+r.Reason+")")
		case label != "" && line == "":
			row = append(row, label)
		case label != "":
			row = append(row, label+" ("+line+")")
		default:
			row = append(row, r.Reason)
		}
		rows = append(rows, row)
	}
	widths := make([]int, len(head))
	for _, row := range rows {
		for i, c := range row[:len(row)-1] {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	bw := bufio.NewWriter(w)
	for _, row := range rows {
		var line strings.Builder
		for i, c := range row {
			if i == len(row)-1 {
				line.WriteString(truncate(c, 120))
				break
			}
			line.WriteString(c + strings.Repeat(" ", widths[i]-len([]rune(c))+2))
		}
		// No trailing blanks when the last columns are empty.
		bw.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	if s.Baseline != "" {
		fmt.Fprintf(bw, "* baseline; Δ is the change against it\n")
	}
	fmt.Fprintf(bw, "%d ok, %d failed, %d pruned, %d skipped\n", s.OK, s.Failed, s.Pruned, s.Skipped)
	bw.Flush()
}

// WriteJUnit writes one testcase per cell: failed cells fail, pruned and
// skipped ones are skipped.
func (s *Summary) WriteJUnit(w io.Writer) error {
	name := s.Name
	if name == "" {
		name = "matrix"
	}
	suite := junit.Suite{Name: name}
	var total float64
	for _, r := range s.Results {
		total += r.Seconds
		c := junit.Case{Name: r.ID, Classname: "smpatch.matrix." + name, Time: strconv.FormatFloat(r.Seconds, 'f', 3, 64)}
		switch r.Status {
		case StatusFailed:
			label, line := note(r)
			body := r.Reason
			switch {
			case label != "" && line != "":
				body += "\n" + label + " at " + line
			case label != "":
				body += "\n" + label
			}
			if r.Triage != nil {
				body += "\nmeans: " + r.Triage.Meaning + "\ntry: " + r.Triage.Try
			}
			if len(r.Tail) > 0 {
				body += "\nlast lines:\n" + strings.Join(r.Tail, "\n")
			}
			msg := r.Reason
			if label != "" {
				msg = label + ": " + r.Reason
			}
			c.Failure = &junit.Message{Message: msg, Type: label, Text: body}
		case StatusPruned, StatusSkipped:
			c.Skipped = &junit.Message{Message: string(r.Status) + ": " + r.Reason}
		}
		if len(r.Metrics) > 0 {
			keys := slices.Sorted(maps.Keys(r.Metrics))
			var b strings.Builder
			for _, k := range keys {
				fmt.Fprintf(&b, "%s=%s\n", k, formatFloat(r.Metrics[k]))
			}
			c.SystemOut = b.String()
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.Time = strconv.FormatFloat(total, 'f', 3, 64)
	return (&junit.Suites{Suites: []junit.Suite{suite}}).Write(w)
}

// secondsSince rounds the time since t to milliseconds.
func secondsSince(t time.Time) float64 {
	return math.Round(time.Since(t).Seconds()*1000) / 1000
}

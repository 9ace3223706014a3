package launch

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"io"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// ResultsHTML is the report to look at, beside results.md.
const ResultsHTML = "results.html"

// palette colours bars by the value of the first axis that varies.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// groupAxis is the first axis whose value differs between the cells that
// have the metric; bars are coloured by it.
func groupAxis(rs []*Result) string {
	for _, a := range axesOf(rs) {
		seen := map[string]bool{}
		for _, r := range rs {
			seen[valueOf(r, a)] = true
		}
		if len(seen) > 1 {
			return a
		}
	}
	return ""
}

func axesOf(rs []*Result) []string {
	var out []string
	for _, r := range rs {
		for _, v := range r.Values {
			if !slices.Contains(out, v.Axis) {
				out = append(out, v.Axis)
			}
		}
	}
	return out
}

func valueOf(r *Result, axis string) string {
	for _, v := range r.Values {
		if v.Axis == axis {
			return v.Value
		}
	}
	return ""
}

// errPoints are bars' ends with their interval, for plotter.XErrorBars.
type errPoints []struct{ x, y, lo, hi float64 }

func (e errPoints) Len() int                        { return len(e) }
func (e errPoints) XY(i int) (float64, float64)     { return e[i].x, e[i].y }
func (e errPoints) XError(i int) (float64, float64) { return e[i].x - e[i].lo, e[i].hi - e[i].x }

// metricChart draws one metric as horizontal bars, one per cell that has it,
// in the matrix's order (so cells sharing axis values sit together),
// coloured by the first axis that varies; whiskers are the confidence
// interval of the median (cells that ran once have none). It returns SVG.
func (s *Summary) metricChart(metric string) ([]byte, error) {
	var rs []*Result
	for _, r := range s.Results {
		if _, ok := r.Metrics[metric]; ok {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = metric
	p.X.Label.Text = metric
	if s.Repeat > 1 {
		p.X.Label.Text = fmt.Sprintf("%s: median of %d runs, whiskers: confidence interval of the median", metric, s.Repeat)
	}
	p.X.Min = 0
	top := 0.0
	for _, r := range rs {
		top = max(top, r.Metrics[metric])
		if st := r.Stats[metric]; st != nil {
			top = max(top, st.CIHi)
		}
	}
	p.X.Max = top * 1.3 // room for the legend, right of the bars
	ga := groupAxis(rs)
	groups := map[string]int{}
	var names []string
	var errs errPoints
	for i, r := range rs {
		// plot draws the first position at the bottom: reverse, so the
		// chart reads top-down in the matrix's order
		pos := float64(len(rs) - 1 - i)
		v := r.Metrics[metric]
		bc, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(10))
		if err != nil {
			return nil, err
		}
		bc.Horizontal = true
		bc.XMin = pos
		g := valueOf(r, ga)
		gi, seen := groups[g]
		if !seen {
			gi = len(groups)
			groups[g] = gi
		}
		bc.Color = palette[gi%len(palette)]
		bc.LineStyle.Width = 0
		p.Add(bc)
		if !seen && ga != "" {
			p.Legend.Add(ga+"="+g, bc)
		}
		if st := r.Stats[metric]; st != nil && st.N > 1 {
			errs = append(errs, struct{ x, y, lo, hi float64 }{v, pos, st.CILo, st.CIHi})
		}
		name := r.ID
		if r.ID == s.Baseline {
			name += " (baseline)"
		}
		names = append(names, name)
	}
	slices.Reverse(names)
	if len(errs) > 0 {
		eb, err := plotter.NewXErrorBars(errs)
		if err != nil {
			return nil, err
		}
		p.Add(eb)
	}
	p.NominalY(names...)
	p.Legend.Top = true
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	h := vg.Points(float64(60 + 16*len(rs)))
	if ga != "" {
		h += vg.Points(float64(14 * len(groups)))
	}
	wt, err := p.WriterTo(vg.Points(760), h, "svg")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, err
	}
	svg := buf.Bytes()
	if i := bytes.Index(svg, []byte("<svg")); i > 0 {
		svg = svg[i:] // inline: no XML declaration
	}
	return svg, nil
}

type htmlCell struct {
	ID, Values, Status, Reason, Triage, Line, Launch, Metrics, Log, Class string
}

type htmlChart struct {
	Metric string
	SVG    template.HTML
}

var htmlTmpl = template.Must(template.New("r").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #ccc; padding: 3px 8px; vertical-align: top; text-align: left; }
th { background: #f3f3f3; }
tr.failed td { background: #fdecea; } tr.pruned td, tr.skipped td { color: #777; }
code { font-size: 12px; white-space: pre-wrap; word-break: break-all; }
.chart svg { max-width: 100%; height: auto; }
</style></head><body>
<h1>{{.Title}}</h1>
<p>{{.Counts}}</p>
{{range .Notes}}<p>{{.}}</p>
{{end}}{{range .Charts}}<h2>{{.Metric}}</h2>
<div class="chart" id="chart-{{.Metric}}">{{.SVG}}</div>
{{end}}{{if .Verdicts}}<h2>A/B against {{.Baseline}}</h2>
<table><tr><th>cell</th><th>metric</th><th>verdict</th></tr>
{{range .Verdicts}}<tr><td>{{.A}}</td><td>{{.Metric}}</td><td>{{.Text}}</td></tr>
{{end}}</table>
<p>{{.Method}}</p>
{{end}}<h2>Cells</h2>
<table><tr><th>cell</th><th>values</th><th>status</th><th>metrics</th><th>triage / reason</th><th>launch</th><th>log</th></tr>
{{range .Cells}}<tr class="{{.Class}}"><td>{{.ID}}</td><td>{{.Values}}</td><td>{{.Status}}</td><td>{{.Metrics}}</td>
<td>{{if .Triage}}<b>{{.Triage}}</b> {{end}}{{.Reason}}{{if .Line}}<br><code>{{.Line}}</code>{{end}}</td>
<td><code>{{.Launch}}</code></td><td><code>{{.Log}}</code></td></tr>
{{end}}</table>
</body></html>
`))

// WriteHTML writes results.html: one self-contained page (inline SVG, no
// script, nothing fetched) with a bar chart per metric, the A/B verdicts
// against the baseline, and every cell with its status, triage line and
// launch line.
func (s *Summary) WriteHTML(w io.Writer) error {
	title := s.Name
	if title == "" {
		title = "matrix"
	}
	data := struct {
		Title, Counts, Baseline, Method string
		Notes                           []string
		Charts                          []htmlChart
		Verdicts                        []*Comparison
		Cells                           []htmlCell
	}{Title: title, Baseline: s.Baseline, Method: compareMethod,
		Counts: fmt.Sprintf("%d ok, %d failed, %d pruned, %d skipped", s.OK, s.Failed, s.Pruned, s.Skipped)}
	if s.Repeat > 1 {
		data.Notes = append(data.Notes, fmt.Sprintf("Each cell ran %d times, a fresh server each time, round-robin over the cells; bars are medians, whiskers the distribution-free confidence interval of the median.", s.Repeat))
	}
	for _, m := range s.Metrics {
		svg, err := s.metricChart(m)
		if err != nil {
			return fmt.Errorf("chart %s: %w", m, err)
		}
		if svg != nil {
			data.Charts = append(data.Charts, htmlChart{Metric: m, SVG: template.HTML(svg)})
		}
	}
	if s.Baseline != "" && s.result(s.Baseline) != nil {
		data.Verdicts = s.baselineComparisons()
	}
	for _, r := range s.Results {
		label, line := note(r)
		c := htmlCell{ID: r.ID, Values: formatValues(r.Values), Status: string(r.Status), Reason: r.Reason,
			Triage: label, Line: line, Launch: r.Launch, Log: r.Log, Class: string(r.Status)}
		if r.ID == s.Baseline {
			c.ID += " (baseline)"
		}
		var ms []string
		for i, m := range s.Metrics {
			if _, ok := r.Metrics[m]; ok {
				ms = append(ms, m+" "+s.metricCells(r)[i*(1+btoi(s.Baseline != ""))])
			}
		}
		c.Metrics = strings.Join(ms, "; ")
		data.Cells = append(data.Cells, c)
	}
	return htmlTmpl.Execute(w, data)
}

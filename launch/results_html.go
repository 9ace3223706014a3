package launch

import (
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
)

// ResultsHTML is the report to look at, beside results.md.
const ResultsHTML = "results.html"

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

type htmlCell struct {
	ID, Values, Status, Reason, Triage, Line, Launch, Metrics, Log, Href, Class string
}

type htmlChart struct {
	Metric string
	N      int
	SVG    template.HTML
}

var htmlTmpl = template.Must(template.New("r").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "DejaVu Sans", sans-serif; margin: 2em; color: #1a1a1a; max-width: 1400px; }
h1 { margin-bottom: .2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; margin: .6em 0 1em; }
dl.meta dt { color: #555; } dl.meta dd { margin: 0; }
.counts b { font-weight: 600; } .counts .failed { color: #a40000; }
table { border-collapse: collapse; margin: 1em 0; }
td, th { border: 1px solid #ccc; padding: 3px 8px; vertical-align: top; text-align: left; }
th { background: #f3f3f3; }
tr.failed td { background: #fdecea; } tr.pruned td, tr.skipped td { color: #666; }
code { font-size: 12px; white-space: pre-wrap; word-break: break-all; }
.chartbox { overflow-x: auto; }
svg.chart { font: 11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, "DejaVu Sans", sans-serif; }
svg.chart .id { text-anchor: end; fill: #1a1a1a; } svg.chart a .id { fill: #0b4f9c; } svg.chart a:hover .id { text-decoration: underline; }
svg.chart .grid { stroke: #e3e3e3; } svg.chart .tick { text-anchor: middle; fill: #444; }
svg.chart .axis { text-anchor: middle; font-weight: 600; }
svg.chart .ci { stroke: #111; stroke-width: 1.2; fill: none; }
svg.chart .val { fill: #111; } svg.chart .vd { fill: #333; } svg.chart .vd.strong { font-weight: 700; fill: #000; }
svg.chart .st { fill: #555; font-style: italic; } svg.chart .row.failed .st { fill: #a40000; font-style: normal; font-weight: 600; }
svg.chart .row:hover { fill-opacity: .8; } svg.chart .lg { fill: #1a1a1a; }
</style></head><body>
<h1>{{.Title}}</h1>
{{if .Meta}}<dl class="meta">{{range .Meta}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl>
{{end}}<p class="counts"><b>{{.OK}}</b> ok, <b class="{{if .Failed}}failed{{end}}">{{.Failed}}</b> failed, <b>{{.Pruned}}</b> pruned, <b>{{.Skipped}}</b> skipped{{if .MetricNames}}; measured: {{.MetricNames}}{{end}}</p>
{{range .Notes}}<p>{{.}}</p>
{{end}}{{range .Charts}}<h2>{{.Metric}}</h2>
<div class="chartbox" id="chart-{{.N}}">{{.SVG}}</div>
{{end}}{{if .Charts}}<p>Every cell has a row: a bar where the metric was read, its status and reason where not (hover a row for the cell's values and the full reason; a cell's id links to its log).{{if .Verdicts}} Beside each bar, its change against the baseline: "real" when it is more than noise (Mann-Whitney U, p &lt; 0.05), "noise" when not.{{end}}</p>
{{end}}{{if .Verdicts}}<h2>A/B against {{.Baseline}}</h2>
<table><tr><th>cell</th><th>metric</th><th>verdict</th></tr>
{{range .Verdicts}}<tr><td>{{.A}}</td><td>{{.Metric}}</td><td>{{.Text}}</td></tr>
{{end}}</table>
<p>{{.Method}}</p>
{{end}}<h2>Cells</h2>
<table><tr><th>cell</th><th>values</th><th>status</th><th>{{.MetricNames}}</th><th>triage / reason</th><th>launch</th><th>log</th></tr>
{{range .Cells}}<tr class="{{.Class}}"><td>{{.ID}}</td><td>{{.Values}}</td><td>{{.Status}}</td><td>{{.Metrics}}</td>
<td>{{if .Triage}}<b>{{.Triage}}</b> {{end}}{{.Reason}}{{if .Line}}<br><code>{{.Line}}</code>{{end}}</td>
<td><code>{{.Launch}}</code></td><td>{{if .Href}}<a href="{{.Href}}"><code>{{.Log}}</code></a>{{end}}</td></tr>
{{end}}</table>
</body></html>
`))

// WriteHTML writes results.html: one self-contained page (inline SVG, no
// script, nothing fetched): the run's metadata, a bar chart per metric
// with every cell in it, the A/B verdicts against the baseline, and every
// cell with its status, triage line, launch line and a link to its log.
func (s *Summary) WriteHTML(w io.Writer) error {
	title := s.Name
	if title == "" {
		title = "matrix"
	}
	data := struct {
		Title, Baseline, Method, MetricNames string
		OK, Failed, Pruned, Skipped          int
		Meta                                 [][2]string
		Notes                                []string
		Charts                               []htmlChart
		Verdicts                             []*Comparison
		Cells                                []htmlCell
	}{Title: title, Baseline: s.Baseline, Method: compareMethod, MetricNames: strings.Join(s.Metrics, ", "),
		OK: s.OK, Failed: s.Failed, Pruned: s.Pruned, Skipped: s.Skipped, Meta: s.Meta.metaLines(s.Runner)}
	if s.Repeat > 1 {
		data.Notes = append(data.Notes, fmt.Sprintf("Each cell ran %d times, a fresh server each time, round-robin over the cells; bars are medians, whiskers the distribution-free confidence interval of the median.", s.Repeat))
	}
	for i, m := range s.Metrics {
		if svg := s.metricChart(m, i); svg != "" {
			data.Charts = append(data.Charts, htmlChart{Metric: m, N: i, SVG: template.HTML(svg)})
		}
	}
	if s.Baseline != "" && s.result(s.Baseline) != nil {
		data.Verdicts = s.baselineComparisons()
	}
	for _, r := range s.Results {
		label, line := note(r)
		c := htmlCell{ID: r.ID, Values: formatValues(r.Values), Status: string(r.Status), Reason: r.Reason,
			Triage: label, Line: line, Launch: r.Launch, Log: r.Log, Href: logHref(r.Log), Class: string(r.Status)}
		if r.ID == s.Baseline {
			c.ID += " (baseline)"
		}
		var ms []string
		for i, m := range s.Metrics {
			if _, ok := r.Metrics[m]; ok {
				ms = append(ms, s.metricCells(r)[i*(1+btoi(s.Baseline != ""))]+" "+m)
			}
		}
		c.Metrics = strings.Join(ms, "; ")
		data.Cells = append(data.Cells, c)
	}
	return htmlTmpl.Execute(w, data)
}

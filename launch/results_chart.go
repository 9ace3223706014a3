package launch

import (
	"fmt"
	"html"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
)

// The bar chart of one metric in results.html: inline SVG, styled by the
// page's CSS (sans-serif, classes instead of attributes, so that a chart
// of 1,000 cells stays small). Every cell has a row in the matrix's order:
// a bar with its value and confidence interval for a cell that has the
// metric, the status and reason in place of the bar for one that failed,
// was pruned or skipped; the verdict against the baseline beside it; the
// cell's id links to its log; hovering a row shows its values and reason.
// Bars are coloured by the first axis whose value varies, and patterned
// too, so that the groups stay apart printed in greyscale.

// chartFills are the Okabe-Ito colours (told apart with colour-blindness),
// and chartPatterns the overlay that tells them apart in greyscale.
var (
	chartFills    = []string{"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#555555"}
	chartPatterns = []string{"", `<path d="M0,6 L6,0" stroke="#fff" stroke-width="1.6"/>`, `<circle cx="3" cy="3" r="1.3" fill="#fff"/>`,
		`<path d="M0,3 H6 M3,0 V6" stroke="#fff" stroke-width="1.2"/>`, `<path d="M0,0 L6,6" stroke="#fff" stroke-width="1.6"/>`,
		`<path d="M0,3 H6" stroke="#fff" stroke-width="1.6"/>`, `<path d="M3,0 V6" stroke="#222" stroke-width="1.2"/>`, ""}
)

const (
	chartRowH  = 18
	chartBarH  = 12
	chartPlotW = 340
	chartCharW = 6.4 // px per character of 11px sans-serif, for layout
	chartMaxID = 46  // characters of an id shown; the rest on hover
)

// chartRow is one cell's row.
type chartRow struct {
	r        *Result
	group    int
	has      bool
	v        float64
	lo, hi   float64
	ci       bool
	verdict  string
	strong   bool
	baseline bool
}

// metricChart is the chart of metric as inline SVG, nil when no cell has it
// and none failed (nothing to show). n numbers the chart in the page, for
// the ids of its patterns.
func (s *Summary) metricChart(metric string, n int) string {
	rows, groups, ga := s.chartRows(metric)
	if len(rows) == 0 {
		return ""
	}
	top := 0.0
	for _, c := range rows {
		if c.has {
			top = max(top, c.v, c.hi)
		}
	}
	step := niceStep(top / 5)
	axisMax := math.Ceil(top/step) * step
	if axisMax <= 0 {
		axisMax, step = 1, 0.2
	}
	idChars := 0
	for _, c := range rows {
		idChars = max(idChars, min(len([]rune(c.r.ID))+btoi(c.baseline)*11, chartMaxID))
	}
	labelW := float64(idChars)*chartCharW + 12
	valueW := 0.0
	for _, c := range rows {
		if c.has {
			valueW = max(valueW, float64(len(s.valueText(c)))*chartCharW+14)
		}
	}
	verdictW := 0.0
	for _, c := range rows {
		verdictW = max(verdictW, float64(len(c.verdict))*chartCharW+10)
	}
	legendH := 0
	if ga != "" {
		legendH = 22
	}
	plotX := labelW
	plotTop := float64(legendH + 6)
	width := labelW + chartPlotW + valueW + verdictW
	height := plotTop + float64(len(rows)*chartRowH) + 40
	scale := func(v float64) float64 { return plotX + v/axisMax*chartPlotW }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`, width, height, width, height)
	fmt.Fprintf(&b, "<title>%s, one row per cell</title><defs>", esc(metric))
	for i := range groups {
		fmt.Fprintf(&b, `<pattern id="p%d-%d" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="%s"/>%s</pattern>`,
			n, i, chartFills[i%len(chartFills)], chartPatterns[i%len(chartPatterns)])
	}
	b.WriteString("</defs>")
	if ga != "" {
		x := plotX
		fmt.Fprintf(&b, `<text x="%.0f" y="14" class="lg">%s:</text>`, x, esc(ga))
		x += float64(len(ga)+2) * chartCharW
		for i, g := range groups {
			fmt.Fprintf(&b, `<rect x="%.0f" y="4" width="12" height="12" fill="url(#p%d-%d)"/><text x="%.0f" y="14" class="lg">%s</text>`, x, n, i, x+16, esc(emptyAsNone(g)))
			x += 16 + float64(len(emptyAsNone(g))+2)*chartCharW
		}
	}
	// Grid and ticks.
	bottom := plotTop + float64(len(rows)*chartRowH)
	for t := 0.0; t <= axisMax+step/2; t += step {
		x := scale(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" class="grid"/><text x="%.1f" y="%.0f" class="tick">%s</text>`,
			x, plotTop, x, bottom, x, bottom+13, tickLabel(t, step))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" class="axis">%s</text>`, plotX+chartPlotW/2, bottom+30, esc(s.axisTitle(metric)))
	for i, c := range rows {
		y := plotTop + float64(i*chartRowH)
		s.chartRowSVG(&b, c, n, y, plotX+chartPlotW+valueW, scale)
	}
	b.WriteString("</svg>")
	return b.String()
}

// chartRowSVG writes one row: the id (a link to the log), the bar and its
// whisker, or the status; the value; the verdict.
func (s *Summary) chartRowSVG(b *strings.Builder, c chartRow, n int, y, verdictX float64, scale func(float64) float64) {
	r := c.r
	plotX := scale(0)
	mid := y + chartRowH/2 + 4
	fmt.Fprintf(b, `<g class="row %s"><title>%s</title>`, r.Status, esc(rowTitle(r)))
	label := r.ID
	if c.baseline {
		label += " (baseline)"
	}
	if len([]rune(label)) > chartMaxID {
		label = string([]rune(label)[:chartMaxID-1]) + "…"
	}
	if href := logHref(r.Log); href != "" {
		fmt.Fprintf(b, `<a href="%s"><text x="%.0f" y="%.0f" class="id">%s</text></a>`, esc(href), plotX-6, mid, esc(label))
	} else {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" class="id">%s</text>`, plotX-6, mid, esc(label))
	}
	end := plotX
	if c.has {
		w := scale(c.v) - plotX
		fmt.Fprintf(b, `<rect x="%.0f" y="%.0f" width="%.1f" height="%d" fill="url(#p%d-%d)" class="bar"/>`, plotX, y+3, w, chartBarH, n, c.group)
		end = scale(c.v)
		if c.ci {
			lo, hi := scale(c.lo), scale(c.hi)
			fmt.Fprintf(b, `<path d="M%.1f,%.0fV%.0fM%.1f,%.0fH%.1fM%.1f,%.0fV%.0f" class="ci"/>`, lo, y+5, y+13, lo, y+9, hi, hi, y+5, y+13)
			end = max(end, hi)
		}
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" class="val">%s</text>`, end+5, mid, esc(s.valueText(c)))
	} else {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" class="st">%s</text>`, plotX+4, mid, esc(statusText(r, s.Metrics)))
	}
	if c.verdict != "" {
		cls := "vd"
		if c.strong {
			cls = "vd strong"
		}
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" class="%s">%s</text>`, verdictX, mid, cls, esc(c.verdict))
	}
	b.WriteString("</g>")
}

// chartRows are every cell's row for metric, the groups' values in order
// of first appearance and the axis the groups are of ("" for none).
func (s *Summary) chartRows(metric string) ([]chartRow, []string, string) {
	ga := groupAxis(s.Results)
	var groups []string
	verdicts := map[string]*Comparison{}
	if s.Baseline != "" && s.result(s.Baseline) != nil {
		for _, c := range s.baselineComparisons() {
			if c.Metric == metric {
				verdicts[c.A] = c
			}
		}
	}
	var rows []chartRow
	for _, r := range s.Results {
		g := valueOf(r, ga)
		gi := slices.Index(groups, g)
		if gi < 0 {
			gi = len(groups)
			groups = append(groups, g)
		}
		c := chartRow{r: r, group: gi, baseline: r.ID == s.Baseline}
		if v, ok := r.Metrics[metric]; ok {
			c.has, c.v = true, v
			if st := r.Stats[metric]; st != nil && st.N > 1 {
				c.ci, c.lo, c.hi = true, st.CILo, st.CIHi
			}
		}
		switch cmp := verdicts[r.ID]; {
		case c.baseline:
			c.verdict = "baseline"
		case cmp != nil && c.has && cmp.NA > 0 && cmp.NB > 0:
			c.verdict, c.strong = verdictShort(cmp), cmp.Distinguishable
		}
		rows = append(rows, c)
	}
	if ga == "" {
		groups = []string{""}
	}
	return rows, groups, ga
}

// verdictShort is a verdict beside its bar: the change against the
// baseline and whether it is more than noise.
func verdictShort(c *Comparison) string {
	switch {
	case c.P == nil:
		return fmt.Sprintf("%s vs baseline (one run: untested)", pct(c.ChangePct))
	case c.Distinguishable:
		return fmt.Sprintf("%s [%s, %s] vs baseline: real, p %s", pct(c.ChangePct), pct(c.CILoPct), pct(c.CIHiPct), formatP(*c.P))
	default:
		return fmt.Sprintf("%s [%s, %s] vs baseline: noise, p %s", pct(c.ChangePct), pct(c.CILoPct), pct(c.CIHiPct), formatP(*c.P))
	}
}

// axisTitle names the metric (its name carries the unit) and what a bar is.
func (s *Summary) axisTitle(metric string) string {
	if s.Repeat > 1 {
		return fmt.Sprintf("%s: median of %d runs; whiskers: distribution-free confidence interval of the median", metric, s.Repeat)
	}
	return metric + " (one run per cell)"
}

func (s *Summary) valueText(c chartRow) string {
	v := sigFigs(c.v)
	if c.ci {
		return fmt.Sprintf("%s [%s, %s]", v, sigFigs(c.lo), sigFigs(c.hi))
	}
	return v
}

// statusText stands in for the bar of a cell without the metric.
func statusText(r *Result, metrics []string) string {
	label, _ := note(r)
	switch r.Status {
	case StatusFailed:
		if label != "" {
			return "✕ failed: " + label
		}
		return "✕ failed: " + truncate(r.Reason, 60)
	case StatusPruned:
		rule, _, _ := strings.Cut(r.Reason, ":")
		return "– pruned: " + truncate(rule, 60)
	case StatusSkipped:
		return "· skipped: " + truncate(r.Reason, 60)
	}
	return "ok, but no value read (" + strings.Join(metrics, ", ") + ")"
}

// rowTitle is a row's hover text: the cell, its values and why it has no
// bar.
func rowTitle(r *Result) string {
	t := r.ID + "\n" + formatValues(r.Values) + "\n" + string(r.Status)
	if r.Reason != "" {
		t += ": " + r.Reason
	}
	if label, line := note(r); label != "" {
		t += "\n" + label
		if line != "" {
			t += " at " + truncate(line, 200)
		}
	}
	return t
}

// logHref is a log's address relative to results.html: the logs folder
// beside it.
func logHref(log string) string {
	if log == "" {
		return ""
	}
	return LogsDir + "/" + path.Base(strings.ReplaceAll(log, "\\", "/"))
}

// niceStep rounds a raw tick step up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func tickLabel(t, step float64) string {
	decimals := max(0, -int(math.Floor(math.Log10(step))))
	if step*math.Pow(10, float64(decimals)) != math.Trunc(step*math.Pow(10, float64(decimals))) {
		decimals++
	}
	return strconv.FormatFloat(t, 'f', decimals, 64)
}

// sigFigs prints a value with four significant digits at most (but every
// digit before the point).
func sigFigs(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return formatFloat(v)
	}
	d := max(0, 3-int(math.Floor(math.Log10(math.Abs(v)))))
	s := strconv.FormatFloat(v, 'f', d, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func emptyAsNone(s string) string {
	if s == "" {
		return "[]"
	}
	return s
}

func esc(s string) string { return html.EscapeString(s) }

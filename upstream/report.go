package upstream

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/smpatch/smpatch/internal/junit"
	"github.com/smpatch/smpatch/internal/words"
)

// Formats are the report formats of smpatch check.
var Formats = []string{"text", "json", "junit", "github"}

// Write writes the report in format.
func (rp *Report) Write(w io.Writer, format string) error {
	rp.settle()
	switch format {
	case "text", "":
		return rp.WriteText(w)
	case "json":
		return rp.WriteJSON(w)
	case "junit":
		return rp.WriteJUnit(w)
	case "github":
		return rp.WriteGitHub(w)
	}
	return fmt.Errorf("unknown format %q (want %s)", format, strings.Join(Formats, ", "))
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// WriteText writes a table: one row per patch, then the changes found in a
// range, then a summary line.
func (rp *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROJECT\tPATCH\tSTATUS\tVARIANT\tVERSION\tDETAIL")
	for _, r := range rp.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Project, rp.name(r), r.Status, dash(r.Variant), dash(r.Version), oneLine(r.Detail))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rp.Results {
		if len(r.Attempts) == 0 || (r.Shape != "" && !rp.Verbose) {
			continue
		}
		fmt.Fprintf(w, "\n%s %s: no variant resolves on %s\n", r.Project, rp.name(r), dash(r.Version))
		for _, a := range r.Attempts {
			fmt.Fprintf(w, "  tried %s: %s", a.Variant, a.Outcome)
			if a.Reason != "" {
				fmt.Fprintf(w, ": %s", oneLine(a.Reason))
			}
			fmt.Fprintln(w)
		}
	}
	for _, r := range rp.Results {
		ri := r.Range
		if ri == nil {
			continue
		}
		fmt.Fprintf(w, "\n%s %s over %s..%s (%d commits, %d planned): %s at %s",
			r.Project, rp.name(r), ri.From, ri.To, ri.Commits, ri.Planned, ri.Start, short(ri.Base))
		if len(ri.Changes) == 0 {
			fmt.Fprintf(w, ", unchanged\n")
		} else {
			fmt.Fprintln(w)
		}
		for _, c := range ri.Changes {
			fmt.Fprintf(w, "  %s %s  %s -> %s  %s\n", short(c.Commit), c.Date.Format("2006-01-02"), c.From, c.To, c.Subject)
		}
		writeVariantWindows(w, ri.Variants)
	}
	for _, r := range rp.verdicts() {
		fmt.Fprintf(w, "\n%s %s: %s\n", r.Project, rp.name(r), r.Lifecycle.Verdict)
		for _, e := range r.Lifecycle.Evidence {
			fmt.Fprintf(w, "  %s\n", e)
		}
		if pr := r.Lifecycle.PR; pr != "" {
			fmt.Fprintf(w, "  pr: %s\n", pr)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, rp.summary())
	return nil
}

// name is how a result is named in tables, JUnit and annotations: the
// patch, with "@REF" when the report checks that project's patch on more
// than one revision (several --upstream of one project), so rows and test
// cases stay apart.
func (rp *Report) name(r Result) string {
	n := 0
	for _, o := range rp.Results {
		if o.Project == r.Project && o.Patch == r.Patch {
			n++
		}
	}
	if n > 1 && r.Ref != "" {
		return r.Patch + "@" + r.Ref
	}
	return r.Patch
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// summary is one line: counts by status and the verdict.
func (rp *Report) summary() string {
	c := rp.Counts()
	var parts []string
	for _, s := range []Status{Applies, Fuzzy, AlreadyUpstream, Conflict, NoVariant, Error} {
		if c[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c[s], s))
		}
	}
	if len(parts) == 0 {
		return "no patches checked"
	}
	verdict := "ok"
	if n := rp.Failed(); n > 0 {
		verdict = fmt.Sprintf("%d failing", n)
	}
	return fmt.Sprintf("%d patches: %s (%s)", len(rp.Results), strings.Join(parts, ", "), verdict)
}

// WriteJSON writes {"results": [...], "strict": bool, "failed": n}.
func (rp *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	results := rp.Results
	if results == nil {
		results = []Result{}
	}
	return enc.Encode(struct {
		Results []Result `json:"results"`
		Strict  bool     `json:"strict"`
		Failed  int      `json:"failed"`
	}{results, rp.Strict, rp.Failed()})
}

// WriteJUnit writes JUnit XML: one testsuite per project, one testcase per
// patch; conflict and no-variant (and fuzzy with strict) fail, an error is an
// error, already-upstream is skipped with the reason.
func (rp *Report) WriteJUnit(w io.Writer) error {
	doc := junit.Suites{Name: "smpatch check"}
	for _, p := range rp.Projects() {
		s := junit.Suite{Name: string(p)}
		for _, r := range rp.Results {
			if r.Project != p {
				continue
			}
			c := junit.Case{Name: rp.name(r), Classname: "smpatch.check." + string(p)}
			msg := &junit.Message{Message: string(r.Status) + ": " + oneLine(r.Detail), Type: string(r.Status), Text: caseText(r)}
			switch {
			case r.Status == Error:
				c.Error = msg
			case r.Status.Failed(rp.Strict):
				c.Failure = msg
			case r.Status == AlreadyUpstream:
				c.Skipped = &junit.Message{Message: "already upstream: " + oneLine(r.Detail)}
			default:
				c.SystemOut = caseText(r)
			}
			s.Cases = append(s.Cases, c)
		}
		doc.Suites = append(doc.Suites, s)
	}
	return doc.Write(w)
}

// caseText is the longer text of a result: where, which variant, the range.
func caseText(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "revision: %s\n", r.Revision)
	if r.Variant != "" {
		fmt.Fprintf(&b, "variant: %s\n", r.Variant)
	}
	if r.Version != "" {
		fmt.Fprintf(&b, "version: %s (%s)\n", r.Version, r.VersionFrom)
	}
	if r.Target != "" {
		fmt.Fprintf(&b, "upstream: %s:%d\n", r.Target, r.Line)
	}
	for _, k := range sortedKeys(r.Hunks) {
		fmt.Fprintf(&b, "hunks %s: %d\n", k, r.Hunks[k])
	}
	fmt.Fprintf(&b, "detail: %s\n", r.Detail)
	if ri := r.Range; ri != nil {
		fmt.Fprintf(&b, "range %s..%s: %s at %s\n", ri.From, ri.To, ri.Start, short(ri.Base))
		for _, c := range ri.Changes {
			fmt.Fprintf(&b, "  %s %s %s -> %s %s\n", short(c.Commit), c.Date.Format("2006-01-02"), c.From, c.To, c.Subject)
		}
	}
	return b.String()
}

// GitHub shows at most 10 error and 10 warning annotations per step
// (and 10 notices); more are dropped silently.
const githubPerStep = 10

// WriteGitHub writes GitHub Actions workflow commands: one ::error per
// failing patch and one ::warning per patch that needs attention (fuzzy,
// already upstream), each with the patch's diff file and hunk line. When a
// kind exceeds GitHub's per-step limit, the last annotation of that kind
// names the rest, so none is hidden. A ::notice with the summary comes last.
func (rp *Report) WriteGitHub(w io.Writer) error {
	type ann struct {
		kind, file, title, msg string
		line                   int
	}
	var errs, warns []ann
	for _, r := range rp.Results {
		a := ann{file: r.Source, line: r.SourceLine, title: fmt.Sprintf("smpatch check: %s (%s) %s", rp.name(r), r.Project, r.Status)}
		a.msg = githubMessage(r)
		switch {
		case r.Status.Failed(rp.Strict):
			a.kind = "error"
			errs = append(errs, a)
		case r.Status == Fuzzy || r.Status == AlreadyUpstream:
			a.kind = "warning"
			warns = append(warns, a)
		case r.Lifecycle != nil && r.Lifecycle.Stale:
			// The entry is what to fix: point at its [upstream].
			a.kind, a.title = "warning", fmt.Sprintf("smpatch check: %s (%s) upstream entry stale", rp.name(r), r.Project)
			if f, n, ok := strings.Cut(r.Lifecycle.entry, ":"); ok {
				fmt.Sscan(n, &a.line)
				a.file = f
			}
			warns = append(warns, a)
		}
	}
	emit := func(list []ann) {
		for i, a := range list {
			if i == githubPerStep-1 && len(list) > githubPerStep {
				rest := list[i:]
				names := make([]string, len(rest))
				for j, b := range rest {
					names[j] = strings.TrimPrefix(b.title, "smpatch check: ")
				}
				sort.Strings(names)
				fmt.Fprintf(w, "::%s title=%s::%s\n", a.kind, escapeProperty(fmt.Sprintf("smpatch check: %d more", len(rest))),
					escapeData(strings.Join(names, "\n")))
				return
			}
			props := []string{}
			if a.file != "" {
				props = append(props, "file="+escapeProperty(a.file))
				if a.line > 0 {
					props = append(props, fmt.Sprintf("line=%d", a.line))
				}
			}
			props = append(props, "title="+escapeProperty(a.title))
			fmt.Fprintf(w, "::%s %s::%s\n", a.kind, strings.Join(props, ","), escapeData(a.msg))
		}
	}
	emit(errs)
	emit(warns)
	fmt.Fprintf(w, "::notice title=smpatch check::%s\n", escapeData(rp.summary()))
	// The plain table too, for the log.
	return rp.WriteText(w)
}

func githubMessage(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s: %s", r.Status, r.Revision, oneLine(r.Detail))
	if r.Target != "" {
		fmt.Fprintf(&b, "\nupstream %s:%d", r.Target, r.Line)
	}
	if r.Variant != "" {
		fmt.Fprintf(&b, "\nvariant %s, version %s", r.Variant, dash(r.Version))
	}
	if ri := r.Range; ri != nil && len(ri.Changes) > 0 && (r.Lifecycle == nil || r.Lifecycle.Since == nil) {
		c := ri.Changes[len(ri.Changes)-1]
		fmt.Fprintf(&b, "\nsince %s %s: %s", short(c.Commit), c.Date.Format("2006-01-02"), c.Subject)
	}
	if lc := r.Lifecycle; lc != nil && lc.Verdict != "" {
		fmt.Fprintf(&b, "\n%s", lc.Verdict)
		for _, e := range lc.Evidence {
			fmt.Fprintf(&b, "\n  %s", e)
		}
	}
	if lc := r.Lifecycle; lc != nil && lc.PR != "" {
		fmt.Fprintf(&b, "\npr %s (%s)", lc.PR, dash(lc.Status))
	}
	return b.String()
}

// escapeData and escapeProperty follow GitHub's workflow command encoding.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// WriteStepSummary writes a Markdown table for $GITHUB_STEP_SUMMARY.
func (rp *Report) WriteStepSummary(w io.Writer) error {
	rp.settle()
	fmt.Fprintf(w, "### smpatch check\n\n%s\n\n| project | patch | status | variant | version | upstream | detail |\n| --- | --- | --- | --- | --- | --- | --- |\n", rp.summary())
	for _, r := range rp.Results {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", md(string(r.Project)), md(rp.name(r)), r.Status, md(dash(r.Variant)), md(dash(r.Version)),
			upstreamCell(r), md(oneLine(r.Detail)))
	}
	if vs := rp.verdicts(); len(vs) > 0 {
		fmt.Fprintf(w, "\n#### Upstream\n\n")
		for _, r := range vs {
			fmt.Fprintf(w, "- **%s** (%s): %s\n", md(rp.name(r)), r.Project, md(r.Lifecycle.Verdict))
			for _, e := range r.Lifecycle.Evidence {
				fmt.Fprintf(w, "  - %s\n", md(e))
			}
		}
	}
	return nil
}

// upstreamCell is a summary's upstream column: the entry's status, with
// its pull request as a link, and "retire" or "stale" from the revision.
func upstreamCell(r Result) string {
	lc := r.Lifecycle
	if lc == nil {
		return "-"
	}
	s := dash(lc.Status)
	if lc.PR != "" {
		s = fmt.Sprintf("[%s](%s)", s, strings.NewReplacer("(", "%28", ")", "%29", " ", "%20").Replace(lc.PR))
	}
	switch {
	case lc.Retire:
		s += ", **retire**"
	case lc.Stale:
		s += ", **stale**"
	}
	return s
}

// md makes text from elsewhere one inert Markdown table cell: no line
// break, no cell separator, no HTML or link syntax GitHub would render.
func md(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", "|", "\\|", "<", "&lt;", ">", "&gt;", "[", "\\[", "]", "\\]", "`", "\\`").Replace(s)
}

// writeVariantWindows prints where each variant held over a walk, one run
// a line ("variant resolver: 7b1a20344c84..fdebc938f7f4, 0.5.14 to 0.5.16,
// 1314 commits"), when the walk met more than one variant or a variant
// with a name.
func writeVariantWindows(w io.Writer, vs []VariantWindow) {
	if len(vs) == 0 || len(vs) == 1 && vs[0].Variant == "" && vs[0].Status == "" {
		return
	}
	for _, v := range vs {
		name := "variant " + v.Variant
		if v.Variant == "" {
			name = "no variant"
		}
		if v.Status != "" && v.Variant != "" {
			name += " (" + string(v.Status) + ")"
		}
		span := short(v.First)
		if v.Last != v.First {
			span += ".." + short(v.Last)
		}
		vers := ""
		switch {
		case v.FirstVersion != "" && v.LastVersion != "" && v.FirstVersion != v.LastVersion:
			vers = ", " + v.FirstVersion + " to " + v.LastVersion
		case v.FirstVersion != "":
			vers = ", " + v.FirstVersion
		}
		fmt.Fprintf(w, "  %s: %s%s, %s\n", name, span, vers, words.Count(v.Commits, "commit", "commits"))
	}
}

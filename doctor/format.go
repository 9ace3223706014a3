package doctor

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/internal/termsafe"
)

// WriteText writes the report for people: what was read, one block per
// finding (what happens, the evidence, the remedies, the sources), the
// rules it could not decide and why, and a count. verbose adds each
// undecided rule's missing facts and everything unknown.
func WriteText(w io.Writer, rep *Report, verbose bool) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	tree := rep.Tree
	if tree == "" {
		tree = "none"
	}
	p("doctor: sglang %s at %s\n", termsafe.Line(firstNonEmpty(rep.Version, "unknown")), termsafe.Line(tree))
	p("  host: %s\n", termsafe.Line(rep.Host))
	p("  model: %s\n", termsafe.Line(rep.Model))
	if len(rep.Launch) > 0 {
		p("  launch: %s\n", termsafe.Line(strings.Join(rep.Launch, " ")))
	} else {
		p("  launch: none (smpatch doctor ... -- LAUNCH COMMAND)\n")
	}
	for _, f := range rep.Findings {
		p("%s %s: %s\n", strings.ToUpper(string(f.Severity)), f.Rule, termsafe.Line(f.Title))
		p("  happens: %s\n", termsafe.Line(f.Happens))
		for _, e := range f.Evidence {
			p("  evidence: %s\n", termsafe.Line(e))
		}
		for _, r := range f.Remedies {
			p("  remedy: %s\n", termsafe.Line(r))
		}
		if f.Note != "" {
			p("  note: %s\n", termsafe.Line(f.Note))
		}
		for _, s := range f.Sources {
			p("  source: %s\n", termsafe.Line(s))
		}
	}
	if n := len(rep.Undecided); n > 0 {
		p("undecided: %d rule(s) need what could not be read:\n", n)
		for _, u := range rep.Undecided {
			if verbose {
				p("  %s (%s): %s\n", u.Rule, u.Severity, termsafe.Line(strings.Join(u.Missing, "; ")))
			} else {
				p("  %s (%s): %s\n", u.Rule, u.Severity, termsafe.Line(u.Missing[0]))
			}
		}
	}
	if verbose && len(rep.Unknown) > 0 {
		keys := make([]string, 0, len(rep.Unknown))
		for k := range rep.Unknown {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p("unknown: %s: %s\n", k, termsafe.Line(rep.Unknown[k]))
		}
	}
	p("doctor: %d blocker(s), %d warning(s), %d info; %d rules, %d undecided\n", rep.Blockers, rep.Warnings, rep.Infos, rep.Rules, len(rep.Undecided))
	return nil
}

// WriteList writes the rules: id, severity, title, conditions, remedies,
// sources, and the measured window when windows has one.
func WriteList(w io.Writer, rules []*Rule, windows *Windows) {
	for _, r := range rules {
		fmt.Fprintf(w, "%s (%s): %s\n", r.ID, r.Severity, r.Title)
		for _, c := range r.Conditions() {
			fmt.Fprintf(w, "  when: %s\n", c)
		}
		for _, rm := range r.Remedy {
			fmt.Fprintf(w, "  remedy: %s\n", rm.Line())
		}
		for _, s := range r.Sources {
			fmt.Fprintf(w, "  source: %s\n", s)
		}
		if win := windows.Of(r.ID); win != nil {
			fmt.Fprintf(w, "  window: %s\n", win.Summary())
		}
	}
}

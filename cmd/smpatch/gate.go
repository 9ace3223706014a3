package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/smpatch/smpatch/doctor"
	"github.com/smpatch/smpatch/internal/smver"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/probe"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/upstream/compat"
)

// archGateOptions are apply's --check-arch flags.
type archGateOptions struct {
	ProbeFile    string   // --probe-file: a saved report instead of the live probe
	SM           string   // --sm MAJOR.MINOR: the GPU the patch is meant for
	Force        bool     // --force: a failed requirement warns instead of refusing
	Quiet        bool     // --quiet: print only the requirements not met
	Paint        painter  // colours ok and FAIL
	Python       string   // the interpreter whose environment is probed
	SitePackages []string // explicit site-packages dirs
	TP           int      // --tp: the launch's tensor parallel size (0: no launch known)
	// Findings, when set, collects every requirement checked (for --json).
	Findings *[]archFinding
	// Probe probes this machine when no --probe-file is given (probe.Run
	// when nil).
	Probe func(ctx context.Context, o probe.Options) (*probe.Report, error)
	// Tree and Changes, when set, are the tree being patched and what the
	// patches write there: the compatibility table is read for the
	// flashinfer the tree pins, and doctor's rules about those files are
	// decided on the tree as it will be (the patch's own findings).
	Tree    source.Tree
	Changes map[string][]byte
}

// archFinding is one requirement of one patch, checked: apply --json shows
// them when the gate refuses.
type archFinding struct {
	Patch       string `json:"patch"`
	Requirement string `json:"requirement"`
	OK          bool   `json:"ok"`
	Evidence    string `json:"evidence"`
	NotChecked  string `json:"not_checked,omitempty"`
}

// checkArch checks every requirement of ps against the probe, printing one
// line per requirement with its evidence to w. It returns the warnings to
// record in the journal when --force overrode a failure, or an error with
// exitRefused when a requirement is not met.
func checkArch(ctx context.Context, w io.Writer, opts archGateOptions, ps []*patches.Patch) (notes []string, err error) {
	popts := hostRoots(probe.Options{Python: opts.Python, SitePackages: opts.SitePackages})
	if opts.SM != "" {
		m, err := parseSMFlag(opts.SM)
		if err != nil {
			return nil, withCode(exitUsage, err)
		}
		popts.Majors = []int{m}
	}
	var r *probe.Report
	from := "live probe"
	if opts.ProbeFile != "" {
		r, err = probe.ReadReport(opts.ProbeFile)
		if err != nil {
			return nil, fmt.Errorf("--probe-file: %w", err)
		}
		from = opts.ProbeFile
	} else {
		run := opts.Probe
		if run == nil {
			run = probe.Run
		}
		if r, err = run(ctx, popts); err != nil {
			return nil, fmt.Errorf("--check-arch: %w", err)
		}
	}
	if opts.SM != "" {
		from += ", --sm " + opts.SM
	}
	var failed []string
	distinct := 0
	// A finding an earlier patch of this apply already printed (the same
	// requirement, the same evidence) is not printed again in full.
	seen := map[string]string{}
	for _, p := range ps {
		shared, sharedWith := 0, ""
		if p.Requires.Empty() {
			fmt.Fprintf(w, "check-arch: %s: no requirements\n", opts.Paint.text(p.Name))
			continue
		}
		fs := probe.CheckLaunchRequirements(r, p.Requires, probe.Launch{SM: opts.SM, TP: opts.TP})
		if f, ok := pinFinding(ctx, opts.Tree, p, r, opts.SM); ok {
			fs = append(fs, f)
		}
		for _, f := range fs {
			if f.Host && opts.SM != "" && opts.ProbeFile == "" {
				// --sm prepares a patch for another machine: this one's
				// toolkit and GPUs say nothing about that host's.
				f.NotChecked = "--sm " + opts.SM + ": a requirement of the GPU host, not of this machine; give --probe-file for the GPU host's"
			}
			if opts.Findings != nil {
				*opts.Findings = append(*opts.Findings, archFinding{Patch: p.Name, Requirement: f.Requirement, OK: f.OK, Evidence: f.Evidence, NotChecked: f.NotChecked})
			}
			if f.NotChecked != "" {
				if !opts.Quiet {
					fmt.Fprintf(w, "check-arch: %s: not checked %s (%s)\n", opts.Paint.text(p.Name), opts.Paint.text(f.Requirement), opts.Paint.text(f.NotChecked))
				}
				continue
			}
			word := opts.Paint.word(f.OK)
			key := fmt.Sprintf("%t\x00%s\x00%s", f.OK, f.Requirement, f.Evidence)
			first, repeated := seen[key]
			if !repeated {
				seen[key] = p.Name
			}
			if !f.OK {
				failed = append(failed, fmt.Sprintf("%s: %s: %s", p.Name, f.Requirement, f.Evidence))
				if !repeated {
					distinct++
				}
			}
			switch {
			case repeated && f.OK:
				shared, sharedWith = shared+1, first
			case repeated:
				fmt.Fprintf(w, "check-arch: %s: %s %s: as for %s above\n", opts.Paint.text(p.Name), word, opts.Paint.text(f.Requirement), opts.Paint.text(first))
			case !f.OK || !opts.Quiet:
				ev := wrapEvidence(f.Evidence)
				sep := ": "
				if strings.HasPrefix(ev, "\n") {
					sep = ":"
				}
				fmt.Fprintf(w, "check-arch: %s: %s %s%s%s\n", opts.Paint.text(p.Name), word, opts.Paint.text(f.Requirement), sep, opts.Paint.text(ev))
			}
		}
		if shared > 0 && !opts.Quiet {
			fmt.Fprintf(w, "check-arch: %s: ok %d more requirement(s), as for %s above\n", opts.Paint.text(p.Name), shared, opts.Paint.text(sharedWith))
		}
	}
	if opts.Tree != nil {
		doctored := doctorFindings(ctx, w, opts, r, from, ps)
		failed = append(failed, doctored...)
		distinct += len(doctored)
	}
	if len(failed) == 0 {
		return nil, nil
	}
	if opts.Force {
		fmt.Fprintf(w, "check-arch: warning: --warn-only: applying although %d requirement(s) are not met (%s)\n", distinct, opts.Paint.text(from))
		for _, f := range failed {
			notes = append(notes, fmt.Sprintf("--warn-only over failed --check-arch requirement (%s): %s", from, f))
		}
		return notes, nil
	}
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		names = append(names, p.Name)
	}
	// distinct counts each failing finding once, however many of the
	// patches share it.
	return nil, withCode(exitRefused, fmt.Errorf("--check-arch: %d requirement(s) of %s not met (%s); nothing written", distinct, strings.Join(names, ", "), from))
}

// parseSMFlag reads --sm MAJOR.MINOR.
func parseSMFlag(s string) (int, error) {
	major, _, err := smver.Parse(s)
	if err != nil {
		return 0, fmt.Errorf("--sm: %w", err)
	}
	return major, nil
}

// pinFinding is what the compatibility table says of the flashinfer the
// tree pins, for a patch of the table's module and GPU major (the fused
// all-reduce on SM12x): met when the pin builds it, or when the flashinfer
// the probe found does; else the table's evidence and the version to
// install. False when the table does not speak of p.
func pinFinding(ctx context.Context, t source.Tree, p *patches.Patch, r *probe.Report, sm string) (probe.Finding, bool) {
	tb, err := compat.Default()
	if err != nil || t == nil || p.Project != source.SGLang || p.Requires.FlashInferModule != tb.Sources.Module || !slices.Contains(p.Requires.GPUSMMajor, tb.Sources.Major) {
		return probe.Finding{}, false
	}
	if major, err := parseSMFlag(sm); sm != "" && (err != nil || major != tb.Sources.Major) {
		return probe.Finding{}, false
	}
	f := probe.Finding{Requirement: fmt.Sprintf("the flashinfer sglang pins builds %s for SM %d.x (compatibility table)", tb.Sources.Module, tb.Sources.Major)}
	version := ""
	if v, _, err := t.Version(ctx); err == nil && v != nil {
		version = source.VersionString(v)
	}
	pin, err := compat.ReadTreePin(t)
	if err != nil {
		f.NotChecked = "the tree's flashinfer pin: " + err.Error()
		return f, true
	}
	a := tb.Advise(version, pin)
	f.OK, f.Evidence = a.OK, a.Text
	if !a.Known {
		f.NotChecked = a.Text
		return f, true
	}
	if a.OK || r.FlashInfer == nil {
		return f, true
	}
	// The pin lacks it; the flashinfer installed may have it.
	installed := r.FlashInfer.Version
	verdict := probe.ModuleVerdict(r.FlashInfer, tb.Sources.Module, tb.Sources.Major).Verdict
	fu, inTable := tb.FusionSM12(installed)
	if verdict != probe.Supported && !(inTable && fu.Verdict == compat.Yes) {
		return f, true
	}
	f.OK = true
	f.Evidence += fmt.Sprintf("; installed here: flashinfer %s, which builds it", orUnknown(installed))
	if rep, ok := tb.Check(version, installed); ok {
		f.Evidence += "; " + rep.Summary()
	}
	return f, true
}

func orUnknown(s string) string {
	if s == "" {
		return "(version unknown)"
	}
	return s
}

// doctorFindings decides doctor's rules about the patches' files on the
// tree as the patches leave it, with the host of the gate: one line per
// finding (a blocker fails the gate), and one for the rules that need a
// launch to be decided. It returns the failed lines.
func doctorFindings(ctx context.Context, w io.Writer, opts archGateOptions, r *probe.Report, from string, ps []*patches.Patch) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	label := opts.Paint.text(strings.Join(names, ", "))
	all, err := doctor.Rules()
	if err != nil {
		fmt.Fprintf(w, "check-arch: %s: doctor: not run (%v)\n", label, err)
		return nil
	}
	files := make([]string, 0, len(opts.Changes))
	for f := range opts.Changes {
		files = append(files, f)
	}
	rules := doctor.RulesOf(all, files, names)
	if len(rules) == 0 {
		return nil
	}
	rep, err := doctor.Run(ctx, doctor.Inputs{Tree: doctor.Patched(opts.Tree, opts.Changes), Host: r, HostFrom: from, Env: environ()}, rules)
	if err != nil {
		fmt.Fprintf(w, "check-arch: %s: doctor: not run (%s)\n", label, opts.Paint.text(err.Error()))
		return nil
	}
	var failed []string
	for _, f := range rep.Findings {
		line := fmt.Sprintf("doctor %s %s: %s", f.Severity, f.Rule, f.Happens)
		if opts.Findings != nil {
			*opts.Findings = append(*opts.Findings, archFinding{Patch: strings.Join(names, ", "), Requirement: "doctor " + f.Rule, OK: f.Severity != doctor.Blocker, Evidence: f.Happens})
		}
		word := opts.Paint.word(f.Severity != doctor.Blocker)
		fmt.Fprintf(w, "check-arch: %s: %s %s\n", label, word, opts.Paint.text(line))
		if f.Severity == doctor.Blocker {
			failed = append(failed, fmt.Sprintf("%s: %s", strings.Join(names, ", "), line))
		}
	}
	if n := len(rep.Undecided); n > 0 && !opts.Quiet {
		fmt.Fprintf(w, "check-arch: %s: doctor: %d rule(s) about its files need the launch to be decided (smpatch doctor -- LAUNCH COMMAND)\n", label, n)
	}
	return failed
}

// wrapEvidence puts the parts of a long evidence (joined by "; " outside
// parentheses and brackets) on lines of their own, indented under the
// requirement's line, so that a refusal reads as a list instead of one
// line of hundreds of characters; a short one stays on the line.
func wrapEvidence(e string) string {
	if len(e) <= 160 {
		return e
	}
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(e); i++ {
		switch e[i] {
		case '(', '[':
			depth++
		case ')', ']':
			depth = max(0, depth-1)
		case ';':
			if depth == 0 && i+1 < len(e) && e[i+1] == ' ' {
				parts = append(parts, e[start:i])
				start = i + 2
			}
		}
	}
	parts = append(parts, e[start:])
	return "\n      " + strings.Join(parts, "\n      ")
}

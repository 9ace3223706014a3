package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"

	"github.com/smpatch/smpatch/source"
)

// Windows are the sglang releases and main commits where each rule's
// code conditions hold, measured on real history (scripts/doctorwin,
// make doctor-windows) and kept in rules/windows.json.
type Windows struct {
	// Tags are the release tags walked, oldest first, with their commits.
	Tags []TagRef `json:"tags"`
	// Main is the first-parent walk of the main branch; nil when none.
	Main  *MainWalk          `json:"main,omitempty"`
	Rules map[string]*Window `json:"rules"`
}

// TagRef is one release tag and its commit.
type TagRef struct {
	Name   string `json:"name"`
	Commit string `json:"commit"`
}

// MainWalk is what was walked of main.
type MainWalk struct {
	Branch  string `json:"branch"`
	From    string `json:"from"` // the commit the walk starts from
	To      string `json:"to"`   // its tip
	ToDate  string `json:"to_date"`
	Commits int    `json:"commits"`
}

// Window is one rule's: the tags where its code conditions hold, the
// spans of main where they do, and its code conditions' digest (a
// window measured for conditions since changed is stale).
type Window struct {
	Conds string   `json:"conds"`
	Tags  []string `json:"tags"`
	Main  []Span   `json:"main"`
}

// Span is a run of main's first-parent commits where the conditions
// hold: from From (the first commit, or the walk's start) up to To, the
// first commit where they no longer do ("" while they still hold at the
// tip).
type Span struct {
	From        string `json:"from"`
	FromDate    string `json:"from_date"`
	FromSubject string `json:"from_subject"`
	To          string `json:"to,omitempty"`
	ToDate      string `json:"to_date,omitempty"`
	ToSubject   string `json:"to_subject,omitempty"`
}

// Of is the rule's window; nil when none was measured (or w is nil).
func (w *Windows) Of(id string) *Window {
	if w == nil || w.Rules == nil {
		return nil
	}
	return w.Rules[id]
}

// Summary is the window in one line: the tags as runs, and main's spans.
func (win *Window) Summary() string {
	parts := []string{"tags: none"}
	if len(win.Tags) > 0 {
		parts[0] = "tags: " + strings.Join(win.Tags, ", ")
	}
	if len(win.Main) == 0 {
		parts = append(parts, "main: none")
	}
	for _, s := range win.Main {
		to := "the tip"
		if s.To != "" {
			to = short(s.To) + " " + s.ToDate
		}
		parts = append(parts, fmt.Sprintf("main: %s %s to %s", short(s.From), s.FromDate, to))
	}
	return strings.Join(parts, "; ")
}

func short(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}

var builtinWindows struct {
	once sync.Once
	w    *Windows
	err  error
}

// BuiltinWindows are rules/windows.json.
func BuiltinWindows() (*Windows, error) {
	builtinWindows.once.Do(func() {
		data, err := fs.ReadFile(builtinRules, "rules/windows.json")
		if err != nil {
			builtinWindows.err = err
			return
		}
		var w Windows
		if err := json.Unmarshal(data, &w); err != nil {
			builtinWindows.err = fmt.Errorf("rules/windows.json: %w", err)
			return
		}
		builtinWindows.w = &w
	})
	return builtinWindows.w, builtinWindows.err
}

// CondsDigest is what a window was measured against: the rule's code
// conditions in words.
func CondsDigest(r *Rule) string {
	var parts []string
	for _, c := range r.TreeConds() {
		parts = append(parts, c.describe())
	}
	return strings.Join(parts, " AND ")
}

// TreeState decides, for each rule, its code conditions alone on one
// tree: "holds", "no", or "unknown" (a file that could not be read).
// It is the evaluation a window walk runs on every revision.
func TreeState(ctx context.Context, t source.Tree, rules []*Rule) ([]string, error) {
	f := newFacts()
	(&treeReader{t: t}).pins(f, nil)
	version := ""
	if v, _, err := t.Version(ctx); err == nil && v != nil {
		version = source.VersionString(v)
	}
	compatFacts(f, version)
	e := newEvaluator(f, t, "")
	out := make([]string, len(rules))
	for i, r := range rules {
		st := "holds"
		for _, c := range r.TreeConds() {
			switch tv, _ := e.cond(c); tv {
			case no:
				st = "no"
			case unknown:
				if st == "holds" {
					st = "unknown"
				}
			}
			if st == "no" {
				break
			}
		}
		out[i] = st
	}
	return out, ctx.Err()
}

// WatchedFiles are the tree files the rules' code conditions read.
func WatchedFiles(rules []*Rule) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rules {
		for _, c := range r.TreeConds() {
			for _, f := range c.Files() {
				if !seen[f] {
					seen[f] = true
					out = append(out, f)
				}
			}
		}
	}
	return sortedCopy(out)
}

// RulesOf are the rules about a patch: those whose code conditions read
// one of the files it writes, or whose remedies name it.
func RulesOf(rules []*Rule, files []string, names []string) []*Rule {
	var out []*Rule
	for _, r := range rules {
		hit := false
		for _, f := range r.TreeFiles() {
			if slices.Contains(files, f) {
				hit = true
			}
		}
		for _, rm := range r.Remedy {
			if rm.Patch != "" && slices.Contains(names, rm.Patch) {
				hit = true
			}
		}
		if hit {
			out = append(out, r)
		}
	}
	return out
}

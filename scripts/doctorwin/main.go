// Command doctorwin measures where each doctor rule's code conditions hold
// on real sglang history, and writes doctor/rules/windows.json and
// docs/doctor.md (make doctor-windows):
//
//	go run ./scripts/doctorwin -sglang GITDIR [-main GITDIR] [-main-ref REF] [-since 2026-01-01]
//	go run ./scripts/doctorwin -docs     (docs/doctor.md from the rules and windows.json as they are)
//
// -sglang is a clone holding the release tags; -main a clone holding main
// (the same one when it has both). Each tag is evaluated as it is; main
// is walked first-parent from the parent of its first commit since -since
// up to -main-ref, evaluating only the commits that change a watched file.
// Nothing in the clones is changed, and no upstream code is written here:
// only the windows.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/smpatch/smpatch/doctor"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
	"github.com/smpatch/smpatch/upstream"
)

func main() {
	tagsDir := flag.String("sglang", "", "a clone of sglang with its release tags")
	mainDir := flag.String("main", "", "a clone of sglang with its main branch (default: -sglang)")
	mainRef := flag.String("main-ref", "main", "the main branch's tip: a branch, tag or commit")
	since := flag.String("since", "2026-01-01", "walk main from its first commit on or after this date")
	firstTag := flag.String("first-tag", "v0.5.8", "the oldest release tag walked")
	out := flag.String("o", "doctor/rules/windows.json", "where the windows go")
	docs := flag.String("docs-out", "docs/doctor.md", "where the rules' page goes")
	docsOnly := flag.Bool("docs", false, "only rewrite the page from the windows file as it is")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := run(ctx, *tagsDir, *mainDir, *mainRef, *since, *firstTag, *out, *docs, *docsOnly)
	for _, d := range temps {
		os.RemoveAll(d)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "doctorwin:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, tagsDir, mainDir, mainRef, since, firstTag, out, docs string, docsOnly bool) error {
	rules, err := doctor.Rules()
	if err != nil {
		return err
	}
	if docsOnly {
		w, err := doctor.BuiltinWindows()
		if err != nil {
			return err
		}
		return os.WriteFile(docs, doctor.Markdown(rules, w), 0o644)
	}
	if tagsDir == "" {
		return fmt.Errorf("-sglang: a clone of sglang with its release tags (SGLANG_GIT_DIR)")
	}
	if mainDir == "" {
		mainDir = tagsDir
	}
	eval := func(ctx context.Context, t source.Tree) ([]string, error) { return doctor.TreeState(ctx, t, rules) }
	w := &doctor.Windows{Rules: map[string]*doctor.Window{}}
	for _, r := range rules {
		w.Rules[r.ID] = &doctor.Window{Conds: doctor.CondsDigest(r), Tags: []string{}, Main: []doctor.Span{}}
	}
	if err := walkTags(ctx, tagsDir, firstTag, rules, eval, w); err != nil {
		return err
	}
	if err := walkMain(ctx, mainDir, mainRef, since, rules, eval, w); err != nil {
		return err
	}
	data, err := json.MarshalIndent(w, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(docs, doctor.Markdown(rules, w), 0o644)
}

// open opens a clone: its work tree or git directory, bare or not (a
// bare one through a .git file pointing at it, as a linked work tree is).
func open(dir string) (*git.Repository, error) {
	if repo, err := gitrepo.Open(dir); err == nil {
		return repo, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(abs, "objects")); err != nil {
		return nil, fmt.Errorf("%s: not a git repository", dir)
	}
	tmp, err := os.MkdirTemp("", "doctorwin-")
	if err != nil {
		return nil, err
	}
	temps = append(temps, tmp)
	if err := os.WriteFile(filepath.Join(tmp, ".git"), []byte("gitdir: "+abs+"\n"), 0o644); err != nil {
		return nil, err
	}
	return gitrepo.Open(tmp)
}

// temps are the directories open made, removed at the end.
var temps []string

// walkTags evaluates every release tag from firstTag on.
func walkTags(ctx context.Context, dir, firstTag string, rules []*doctor.Rule, eval upstream.MarkerEval, w *doctor.Windows) error {
	repo, err := open(dir)
	if err != nil {
		return fmt.Errorf("-sglang %s: %w", dir, err)
	}
	tags, err := gitrepo.VersionTags(repo)
	if err != nil {
		return err
	}
	first, err := source.ParseVersion(firstTag)
	if err != nil {
		return fmt.Errorf("-first-tag: %w", err)
	}
	type tag struct {
		name   string
		commit plumbing.Hash
	}
	var list []tag
	for h, names := range tags {
		for _, n := range names {
			v, err := source.ParseVersion(n)
			if err == nil && strings.HasPrefix(n, "v") && source.ComparePEP440(v, first) >= 0 {
				list = append(list, tag{n, h})
			}
		}
	}
	sort.Slice(list, func(i, j int) bool {
		a, _ := source.ParseVersion(list[i].name)
		b, _ := source.ParseVersion(list[j].name)
		return source.ComparePEP440(a, b) < 0
	})
	hashes := make([]plumbing.Hash, len(list))
	for i, t := range list {
		hashes[i] = t.commit
		w.Tags = append(w.Tags, doctor.TagRef{Name: t.name, Commit: t.commit.String()})
	}
	fmt.Fprintf(os.Stderr, "doctorwin: %d release tags\n", len(list))
	states, err := upstream.MarkersAt(ctx, repo, source.SGLang, dir, hashes, eval)
	if err != nil {
		return err
	}
	for i, t := range list {
		for j, r := range rules {
			if states[i][j] == "holds" {
				w.Rules[r.ID].Tags = append(w.Rules[r.ID].Tags, t.name)
			}
		}
	}
	return nil
}

// walkMain walks main's first parents since the date.
func walkMain(ctx context.Context, dir, ref, since string, rules []*doctor.Rule, eval upstream.MarkerEval, w *doctor.Windows) error {
	repo, err := open(dir)
	if err != nil {
		return fmt.Errorf("-main %s: %w", dir, err)
	}
	tip, err := gitrepo.ResolveRevision(repo, ref)
	if err != nil {
		return fmt.Errorf("-main-ref %s: %w", ref, err)
	}
	day, err := time.Parse("2006-01-02", since)
	if err != nil {
		return fmt.Errorf("-since: %w", err)
	}
	base, err := baseBefore(repo, tip, day)
	if err != nil {
		return err
	}
	start := time.Now()
	h, err := upstream.WalkMarkers(ctx, repo, source.SGLang, dir, base, tip, doctor.WatchedFiles(rules), eval)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "doctorwin: main: %d commits, %d states evaluated in %s\n", h.Commits, h.Evaluated, time.Since(start).Round(time.Millisecond))
	w.Main = &doctor.MainWalk{Branch: ref, From: h.Base, To: h.Tip, ToDate: h.TipDate.Format("2006-01-02"), Commits: h.Commits}
	for j, r := range rules {
		win := w.Rules[r.ID]
		var open *doctor.Span
		if h.Start[j] == "holds" {
			open = &doctor.Span{From: h.Base, FromDate: h.BaseDate.Format("2006-01-02"), FromSubject: "(start of the walk)"}
		}
		for _, c := range h.Changes {
			if c.Item != j {
				continue
			}
			switch {
			case c.To == "holds" && open == nil:
				open = &doctor.Span{From: c.Commit, FromDate: c.Date.Format("2006-01-02"), FromSubject: c.Subject}
			case c.To != "holds" && open != nil:
				open.To, open.ToDate, open.ToSubject = c.Commit, c.Date.Format("2006-01-02"), c.Subject
				win.Main = append(win.Main, *open)
				open = nil
			}
		}
		if open != nil {
			win.Main = append(win.Main, *open)
		}
	}
	return nil
}

// baseBefore is the parent of the first first-parent commit of tip's
// line committed on or after day.
func baseBefore(repo *git.Repository, tip plumbing.Hash, day time.Time) (plumbing.Hash, error) {
	h := tip
	for {
		c, err := repo.CommitObject(h)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if len(c.ParentHashes) == 0 || c.Committer.When.Before(day) {
			return h, nil
		}
		h = c.ParentHashes[0]
	}
}

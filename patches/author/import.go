package author

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/termsafe"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/patches/udiff"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
)

// ImportOptions steer Import: one of Git (with Commit), File or URL.
type ImportOptions struct {
	Name, Into string
	Git        string // a local clone
	Commit     string // REV or FROM..TO
	File       string // a .patch or .diff file
	URL        string // a pull request, a commit or a .patch URL
	Summary    string
	// Versions is the variant's range (default ">= " the parent's
	// version, when known).
	Versions string
	// Timeout bounds the fetch of URL (30s when 0).
	Timeout time.Duration
	// Client fetches URL (http.DefaultClient's transport when nil).
	Client *http.Client
}

// OfflineError is a URL that could not be fetched.
type OfflineError struct{ Msg string }

func (e *OfflineError) Error() string { return e.Msg }

// Import makes a catalog entry of an upstream change: a commit (its
// parent to it) or a range FROM..TO of a local clone, read with go-git; a
// git format-patch or plain unified diff file; or a URL fetched once,
// whose sha256 is pinned in the entry. Files outside the project's tree
// (tests, docs) are left out and named; a binary change is refused.
func Import(ctx context.Context, opts ImportOptions) (*Result, error) {
	start := time.Now()
	if !catalog.ValidName(opts.Name) {
		return nil, inputf("%q: a patch name is lower-case letters, digits, '.', '_' and '-'", opts.Name)
	}
	if builtinName(opts.Name) {
		return nil, inputf("%q is the name of a built-in patch: choose another", opts.Name)
	}
	var (
		res *Result
		err error
	)
	switch {
	case opts.Git != "":
		res, err = importGit(ctx, opts)
	case opts.File != "":
		data, rerr := readRegular(opts.File, catalog.MaxDiffSize)
		if rerr != nil {
			if strings.HasPrefix(rerr.Error(), opts.File+":") {
				return nil, &InputError{rerr.Error()}
			}
			return nil, inputf("%s: %v", opts.File, rerr)
		}
		res, err = importPatch(opts, opts.File, data, "file", "")
	case opts.URL != "":
		data, link, ferr := fetch(ctx, opts)
		if ferr != nil {
			return nil, ferr
		}
		res, err = importPatch(opts, opts.URL, data, "url", link)
	default:
		return nil, inputf("import needs --git CLONE --commit REV, --file X.patch or --url URL")
	}
	if err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// importGit reads a commit (against its first parent) or a range.
func importGit(ctx context.Context, opts ImportOptions) (*Result, error) {
	if opts.Commit == "" {
		return nil, inputf("--git needs --commit REV (or FROM..TO)")
	}
	repo, err := gitrepo.Open(opts.Git)
	if err != nil {
		if repo, err = git.PlainOpen(opts.Git); err != nil {
			return nil, inputf("%s: not a git repository: %v", opts.Git, err)
		}
	}
	commit := func(rev string) (*object.Commit, error) { return resolveCommit(ctx, repo, opts.Git, rev) }
	var from, to *object.Commit
	if a, b, ok := strings.Cut(opts.Commit, ".."); ok {
		if from, err = commit(a); err != nil {
			return nil, err
		}
		if to, err = commit(b); err != nil {
			return nil, err
		}
	} else {
		if to, err = commit(opts.Commit); err != nil {
			return nil, err
		}
		if to.NumParents() == 0 {
			return nil, inputf("%s: %s is a root commit: no parent to measure it against", opts.Git, opts.Commit)
		}
		if from, err = to.Parent(0); err != nil {
			return nil, err
		}
	}
	project, err := projectOfCommit(to)
	if err != nil {
		return nil, inputf("%s: %v", opts.Git, err)
	}
	fromTree, err := from.Tree()
	if err != nil {
		return nil, err
	}
	toTree, err := to.Tree()
	if err != nil {
		return nil, err
	}
	diffs, err := object.DiffTreeWithOptions(ctx, fromTree, toTree, &object.DiffTreeOptions{})
	if err != nil {
		return nil, err
	}
	d := &Diffed{}
	for _, ch := range diffs {
		rel := ch.To.Name
		if rel == "" {
			rel = ch.From.Name
		}
		if ch.From.Name != "" && ch.To.Name != "" && ch.From.Name != ch.To.Name {
			return nil, inputf("%s: %s renames %s to %s: smpatch changes file contents only", opts.Git, short(to), ch.From.Name, ch.To.Name)
		}
		if !inProject(project, rel) {
			d.Skipped = append(d.Skipped, rel+" (outside "+string(project)+"'s tree)")
			continue
		}
		c := Change{Path: rel}
		if ch.From.Name != "" {
			if c.Old, err = readBlob(repo, ch.From.TreeEntry.Hash, rel); err != nil {
				return nil, err
			}
		}
		if ch.To.Name != "" {
			if c.New, err = readBlob(repo, ch.To.TreeEntry.Hash, rel); err != nil {
				return nil, err
			}
		}
		if isBinary(c.Old) || isBinary(c.New) {
			return nil, inputf("%s: %s: a binary file: smpatch patches text files only; nothing was written", opts.Git, rel)
		}
		d.Changes = append(d.Changes, c)
	}
	if len(d.Changes) == 0 {
		return nil, inputf("%s: %s changes no file of %s's tree (%s)", opts.Git, opts.Commit, project, strings.Join(source.ProjectRoots(project), ", "))
	}
	ver, vfrom := "", ""
	if rt, err := gitrepo.OpenRevisionOf(repo, from, project, ""); err == nil {
		ver, vfrom = versionOf(ctx, rt)
	} else {
		vfrom = err.Error()
	}
	vr, err := rangeOf(ver, vfrom, opts.Versions, "the parent "+from.Hash.String()[:12])
	if err != nil {
		return nil, err
	}
	subject, _, _ := strings.Cut(strings.TrimSpace(to.Message), "\n")
	what := "commit " + to.Hash.String()
	if from.Hash != firstParent(to) {
		what = fmt.Sprintf("commits %s..%s", from.Hash.String()[:12], to.Hash.String()[:12])
	}
	m := Meta{Summary: orElse(opts.Summary, subject), Source: "git", Clone: cloneDir(repo, opts.Git), Author: fmt.Sprintf("%s <%s>", to.Author.Name, to.Author.Email),
		Link: commitLink(repo, to.Hash.String()), Comment: []string{fmt.Sprintf("%s: imported by smpatch import from %s of %s.", opts.Name, what, opts.Git)}}
	res, _, _, _, err := writeEntry(opts.Into, opts.Name, project, vr, from.Hash.String(), d, m, nil)
	if err != nil {
		return nil, err
	}
	res.Pristine = "parent " + from.Hash.String()
	return res, nil
}

func firstParent(c *object.Commit) plumbing.Hash {
	if len(c.ParentHashes) == 0 {
		return plumbing.ZeroHash
	}
	return c.ParentHashes[0]
}

func short(c *object.Commit) string { return c.Hash.String()[:12] }

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func inProject(p source.Project, rel string) bool {
	for _, r := range source.ProjectRoots(p) {
		if strings.HasPrefix(rel, r) {
			return true
		}
	}
	return false
}

// projectOfCommit is the project a commit's tree is a checkout of.
func projectOfCommit(c *object.Commit) (source.Project, error) {
	t, err := c.Tree()
	if err != nil {
		return "", err
	}
	if _, err := t.Tree("python/sglang"); err == nil {
		return source.SGLang, nil
	}
	if _, err := t.File("flashinfer/__init__.py"); err == nil {
		return source.FlashInfer, nil
	}
	return "", errors.New("neither sglang (python/sglang/) nor flashinfer (flashinfer/__init__.py) at " + short(c))
}

var githubRemote = regexp.MustCompile(`github\.com[:/]([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?/?$`)

// commitLink is the commit's page when the clone's origin is on GitHub.
func commitLink(repo *git.Repository, sha string) string {
	r, err := repo.Remote("origin")
	if err != nil || len(r.Config().URLs) == 0 {
		return ""
	}
	m := githubRemote.FindStringSubmatch(r.Config().URLs[0])
	if m == nil {
		return ""
	}
	return fmt.Sprintf("https://github.com/%s/%s/commit/%s", m[1], m[2], sha)
}

// importPatch makes an entry of a patch file's text: its header (a git
// format-patch mail) gives the subject and author; its files outside the
// project are left out; the diff is kept as it is (it has no base bytes
// to shorten its context against).
func importPatch(opts ImportOptions, src string, data []byte, kind, link string) (*Result, error) {
	pf, err := ParsePatchFile(src, data)
	if err != nil {
		return nil, &InputError{err.Error()}
	}
	project, err := projectOfFiles(src, pf.Files)
	if err != nil {
		return nil, err
	}
	var keep []*udiff.FileDiff
	d := &Diffed{}
	for _, fd := range pf.Files {
		if !inProject(project, fd.Path()) {
			d.Skipped = append(d.Skipped, fd.Path()+" (outside "+string(project)+"'s tree)")
			continue
		}
		keep = append(keep, fd)
	}
	var b bytes.Buffer
	for _, fd := range keep {
		b.Write(fd.Format())
	}
	sum := sha256.Sum256(data)
	m := Meta{Summary: orElse(opts.Summary, orElse(pf.Subject, "Imported from "+filepath.Base(src))), Source: kind, Author: pf.Author,
		Link: link, SHA256: fmt.Sprintf("%x", sum), Comment: []string{fmt.Sprintf("%s: imported by smpatch import from %s.", opts.Name, src)}}
	if pf.Commit != "" {
		m.Comment = append(m.Comment, "commit "+pf.Commit)
	}
	vr, err := rangeOf("", "a patch file carries no version", opts.Versions, src)
	if err != nil {
		return nil, err
	}
	e, err := newEntry(opts.Into, opts.Name, project, vr, "", b.Bytes(), m)
	if err != nil {
		return nil, err
	}
	p, err := e.Load()
	if err != nil {
		return nil, err
	}
	if _, err := e.Write(true); err != nil {
		return nil, err
	}
	res := &Result{Name: opts.Name, TOML: filepath.Join(opts.Into, opts.Name+".toml"), Variant: p.Variants[0].Name, Versions: p.Variants[0].Versions, VersionNote: vr.Note, Skipped: d.Skipped, Pristine: src}
	for k := range e.Diffs {
		res.Diffs = append(res.Diffs, filepath.Join(opts.Into, k))
	}
	for _, fd := range keep {
		res.Files = append(res.Files, fd.Path())
	}
	return res, nil
}

func projectOfFiles(src string, fds []*udiff.FileDiff) (source.Project, error) {
	for _, p := range []source.Project{source.SGLang, source.FlashInfer} {
		for _, fd := range fds {
			if inProject(p, fd.Path()) {
				return p, nil
			}
		}
	}
	return "", inputf("%s: changes no file of sglang (python/sglang/) or flashinfer (flashinfer/, include/, csrc/)", src)
}

var (
	githubPR     = regexp.MustCompile(`^https://github\.com/[^/]+/[^/]+/pull/\d+/?$`)
	githubCommit = regexp.MustCompile(`^https://github\.com/[^/]+/[^/]+/(?:pull/\d+/)?commits?/[0-9a-f]{7,40}/?$`)
)

// fetch GETs the URL once (a GitHub pull request or commit page as its
// .patch), bounded in time and size.
func fetch(ctx context.Context, opts ImportOptions) ([]byte, string, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, "", inputf("%s: not an http(s) URL", opts.URL)
	}
	link := opts.URL
	get := opts.URL
	if githubPR.MatchString(get) || githubCommit.MatchString(get) {
		get = strings.TrimSuffix(get, "/") + ".patch"
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, get, nil)
	if err != nil {
		return nil, "", inputf("%s: %v", get, err)
	}
	c := opts.Client
	if c == nil {
		c = &http.Client{}
	}
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
			return nil, "", err
		}
		return nil, "", &OfflineError{fmt.Sprintf("%s: cannot fetch (offline, or the host does not answer): %v; download it and use --file", get, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", &OfflineError{fmt.Sprintf("%s: HTTP %s", get, resp.Status)}
	}
	data, err := bounded.ReadAll(io.LimitReader(resp.Body, catalog.MaxDiffSize+1), catalog.MaxDiffSize, get)
	if err != nil {
		return nil, "", &InputError{err.Error()}
	}
	return data, link, nil
}

var shortSHA = regexp.MustCompile(`^[0-9a-fA-F]{4,39}$`)

// maxCandidates is how many commits an ambiguous short SHA's error names.
const maxCandidates = 10

// resolveCommit resolves rev in repo as git rev-parse would: a short SHA
// (looked up by prefix in the loose objects and pack indexes of the
// repository and its alternates: unique among commits, or refused with
// the candidates), else a name (with ~N, ^N) or a full SHA.
func resolveCommit(ctx context.Context, repo *git.Repository, where, rev string) (*object.Commit, error) {
	if shortSHA.MatchString(rev) {
		hs, err := gitrepo.HashesWithPrefix(repo, rev)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		var commits []*object.Commit
		for _, h := range hs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if c, ok := commitOf(repo, h); ok && !hasCommit(commits, c) {
				commits = append(commits, c)
			}
		}
		switch {
		case len(commits) == 1:
			return commits[0], nil
		case len(commits) > 1:
			var names []string
			for i, c := range commits {
				if i == maxCandidates {
					names = append(names, fmt.Sprintf("and %d more", len(commits)-maxCandidates))
					break
				}
				subject, _, _ := strings.Cut(strings.TrimSpace(c.Message), "\n")
				names = append(names, fmt.Sprintf("%s %q", short(c), termsafe.Line(truncate(subject, 60))))
			}
			return nil, inputf("%s: %q names %d commits: give more digits (%s)", where, rev, len(commits), strings.Join(names, "; "))
		case len(hs) > 0:
			if _, err := gitrepo.ResolveRevision(repo, rev); err != nil {
				return nil, inputf("%s: %q names %d objects and no commit (%s)", where, rev, len(hs), hs[0].String()[:12])
			}
		}
	}
	h, err := gitrepo.ResolveRevision(repo, rev)
	if err != nil {
		if shortSHA.MatchString(rev) {
			return nil, inputf("%s: no commit starts with %s (its objects and its alternates' read) and no branch or tag has that name", where, rev)
		}
		return nil, inputf("%s: unknown revision %q", where, rev)
	}
	return repo.CommitObject(h)
}

// commitOf is the commit h is, or that the annotated tag h points at.
func commitOf(repo *git.Repository, h plumbing.Hash) (*object.Commit, bool) {
	for range 10 {
		if c, err := repo.CommitObject(h); err == nil {
			return c, true
		}
		t, err := repo.TagObject(h)
		if err != nil {
			return nil, false
		}
		h = t.Target
	}
	return nil, false
}

func hasCommit(cs []*object.Commit, c *object.Commit) bool {
	for _, o := range cs {
		if o.Hash == c.Hash {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// cloneDir is the absolute path of the clone at dir: its work tree's root,
// or the repository directory of a bare one.
func cloneDir(repo *git.Repository, dir string) string {
	if wt, err := repo.Worktree(); err == nil {
		if p, err := filepath.EvalSymlinks(wt.Filesystem.Root()); err == nil {
			return p
		}
	}
	if p, err := filepath.Abs(dir); err == nil {
		return p
	}
	return ""
}

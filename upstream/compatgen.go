package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/smpatch/smpatch/probe"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
	"github.com/smpatch/smpatch/upstream/compat"
)

// CompatSources are the histories a compatibility table is read from.
type CompatSources struct {
	SGLang *git.Repository // sglang's release tags
	// SGLangMain holds the branch read as sglang's main (nil: SGLang);
	// MainBranch names it ("" for none: no main row).
	SGLangMain *git.Repository
	MainBranch string
	FlashInfer *git.Repository // flashinfer's release tags and FlashInferBranch
	// FlashInferBranch is read as flashinfer's main ("" for none).
	FlashInferBranch string
	// SGLangFirst and FlashInferFirst are the oldest release tags read
	// ("0.5.8", "0.6.0rc1").
	SGLangFirst, FlashInferFirst string
	// Since is where main's pin history starts (zero: not read).
	Since time.Time
	// FusionPath are the sglang files of the fused all-reduce (default:
	// python/sglang/srt/layers/flashinfer_comm_fusion.py).
	FusionPath []string
	Progress   io.Writer // one line per revision read (nil: none)
}

// The fused all-reduce: flashinfer's JIT module, and the GPU major the
// table is for.
const (
	fusionModule = "trtllm_comm"
	fusionMajor  = 12
)

// DefaultFusionPath is sglang's file of the fused all-reduce + RMSNorm.
var DefaultFusionPath = []string{"python/sglang/srt/layers/flashinfer_comm_fusion.py"}

// GenerateCompat reads the table: every sglang release tag from
// SGLangFirst on and main's newest commit (their flashinfer pin, and every
// flashinfer name their python/sglang tree uses), every flashinfer release
// tag from FlashInferFirst on and main (whether trtllm_comm builds for
// SM12x, as probe reads it, and every one of those names resolved), and
// the changes of main's pin since Since. Nothing is checked out.
func GenerateCompat(ctx context.Context, src CompatSources) (*compat.Table, error) {
	if src.SGLangMain == nil {
		src.SGLangMain = src.SGLang
	}
	if len(src.FusionPath) == 0 {
		src.FusionPath = DefaultFusionPath
	}
	g := &compatGen{src: src, sgUses: map[plumbing.Hash][]PyUse{}, fiMods: map[modKey]*pyModule{}}
	t := &compat.Table{Format: compat.Format, Sources: compat.Sources{FusionPath: src.FusionPath, Module: fusionModule, Major: fusionMajor}}
	fiRevs, err := revisions(ctx, src.FlashInfer, src.FlashInferFirst, src.FlashInferBranch)
	if err != nil {
		return nil, fmt.Errorf("flashinfer: %w", err)
	}
	sgRevs, err := revisions(ctx, src.SGLang, src.SGLangFirst, "")
	if err != nil {
		return nil, fmt.Errorf("sglang: %w", err)
	}
	if src.MainBranch != "" {
		main, err := branchRevision(src.SGLangMain, src.MainBranch)
		if err != nil {
			return nil, fmt.Errorf("sglang main: %w", err)
		}
		sgRevs = append(sgRevs, main)
	}
	t.Sources.FlashInfer = sourceOf(fiRevs, src.FlashInferBranch)
	t.Sources.SGLang = sourceOf(sgRevs, "")
	t.Sources.SGLang.Branch, t.Sources.SGLang.Head, t.Sources.SGLang.Date = "", "", ""
	if src.MainBranch != "" {
		m := sgRevs[len(sgRevs)-1]
		t.Sources.SGLangMain = &compat.Source{Branch: src.MainBranch, Head: m.rev.Commit, Date: m.rev.Date}
	}
	// sglang: pins and uses.
	for _, r := range sgRevs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g.progress("sglang %s (%s)", r.rev.Ref, r.rev.Commit[:10])
		s, err := g.readSGLang(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("sglang %s: %w", r.rev.Ref, err)
		}
		t.SGLang = append(t.SGLang, s)
	}
	names := map[string]bool{}
	for _, s := range t.SGLang {
		for _, u := range s.Uses {
			names[u.Symbol] = true
		}
	}
	symbols := slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	})
	// flashinfer: the fusion verdict and every name resolved.
	resolved := make([][]pyResolved, len(symbols))
	for _, r := range fiRevs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g.progress("flashinfer %s (%s)", r.rev.Ref, r.rev.Commit[:10])
		f, pkg, err := g.readFlashInfer(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("flashinfer %s: %w", r.rev.Ref, err)
		}
		t.FlashInfer = append(t.FlashInfer, f)
		for i, n := range symbols {
			resolved[i] = append(resolved[i], pkg.resolve(n))
		}
	}
	for i, n := range symbols {
		t.Symbols = append(t.Symbols, compat.Symbol{Name: n, Runs: runsOf(resolved[i], t.FlashInfer)})
	}
	if src.MainBranch != "" && !src.Since.IsZero() {
		g.progress("sglang %s: the pin since %s", src.MainBranch, src.Since.Format(time.DateOnly))
		if t.MainPins, err = mainPins(ctx, src.SGLangMain, src.MainBranch, src.Since); err != nil {
			return nil, fmt.Errorf("sglang %s: %w", src.MainBranch, err)
		}
		t.Sources.SGLangMain.Since = src.Since.Format(time.DateOnly)
	}
	// What the table reads back is what was made.
	data, err := t.Marshal()
	if err != nil {
		return nil, err
	}
	return compat.Parse(data)
}

type modKey struct {
	blob plumbing.Hash
	mod  string
}

type compatGen struct {
	src    CompatSources
	sgUses map[plumbing.Hash][]PyUse // per blob of a python/sglang file
	fiMods map[modKey]*pyModule
}

func (g *compatGen) progress(format string, args ...any) {
	if g.src.Progress != nil {
		fmt.Fprintf(g.src.Progress, "compat: "+format+"\n", args...)
	}
}

// rev is one revision to read.
type rev struct {
	repo   *git.Repository
	commit *object.Commit
	rev    compat.Revision
}

// revisions are repo's version tags from first on, oldest first, then
// branch's newest commit when branch is set.
func revisions(ctx context.Context, repo *git.Repository, first, branch string) ([]rev, error) {
	min, err := source.ParseVersion(first)
	if err != nil {
		return nil, fmt.Errorf("first tag %q: %w", first, err)
	}
	tags, err := gitrepo.VersionTags(repo)
	if err != nil {
		return nil, err
	}
	type tagged struct {
		name string
		h    plumbing.Hash
	}
	var ts []tagged
	for h, names := range tags {
		for _, n := range names {
			v, err := source.ParseVersion(n)
			if err != nil || source.ComparePEP440(v, min) < 0 || !strings.HasPrefix(n, "v") {
				continue
			}
			ts = append(ts, tagged{n, h})
		}
	}
	slices.SortFunc(ts, func(a, b tagged) int {
		va, _ := source.ParseVersion(a.name)
		vb, _ := source.ParseVersion(b.name)
		return source.ComparePEP440(va, vb)
	})
	var out []rev
	for _, t := range ts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c, err := repo.CommitObject(t.h)
		if err != nil {
			return nil, fmt.Errorf("tag %s: %w", t.name, err)
		}
		v, _ := source.ParseVersion(t.name)
		out = append(out, rev{repo: repo, commit: c, rev: compat.Revision{Ref: t.name, Version: source.VersionString(v), Commit: c.Hash.String(), Date: c.Committer.When.UTC().Format(time.DateOnly)}})
	}
	if branch != "" {
		b, err := branchRevision(repo, branch)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// branchRevision is branch's newest commit, named "main" in the table.
func branchRevision(repo *git.Repository, branch string) (rev, error) {
	h, err := gitrepo.ResolveRevision(repo, branch)
	if err != nil {
		return rev{}, err
	}
	c, err := repo.CommitObject(h)
	if err != nil {
		return rev{}, fmt.Errorf("%s: %w", branch, err)
	}
	return rev{repo: repo, commit: c, rev: compat.Revision{Ref: "main", Commit: c.Hash.String(), Date: c.Committer.When.UTC().Format(time.DateOnly)}}, nil
}

func sourceOf(rs []rev, branch string) compat.Source {
	var s compat.Source
	for _, r := range rs {
		if r.rev.Version != "" {
			s.Tags = append(s.Tags, r.rev.Ref)
		} else {
			s.Branch, s.Head, s.Date = branch, r.rev.Commit, r.rev.Date
		}
	}
	return s
}

// files lists the regular files under dir of c's tree with their blob
// hashes, in path order.
func files(repo *git.Repository, c *object.Commit, dir string) ([]string, map[string]plumbing.Hash, error) {
	root, err := repo.TreeObject(c.TreeHash)
	if err != nil {
		return nil, nil, err
	}
	t := root
	if dir != "" {
		if t, err = root.Tree(dir); err != nil {
			if errors.Is(err, object.ErrDirectoryNotFound) {
				return nil, map[string]plumbing.Hash{}, nil
			}
			return nil, nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	hashes := map[string]plumbing.Hash{}
	var paths []string
	w := object.NewTreeWalker(t, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if e.Mode != filemode.Regular && e.Mode != filemode.Executable {
			continue
		}
		p := path.Join(dir, name)
		paths = append(paths, p)
		hashes[p] = e.Hash
	}
	slices.Sort(paths)
	return paths, hashes, nil
}

// readSGLang reads one sglang revision: its pin and the flashinfer names
// its python/sglang tree uses.
func (g *compatGen) readSGLang(ctx context.Context, r rev) (compat.SGLang, error) {
	s := compat.SGLang{Revision: r.rev, Uses: []compat.Use{}}
	fsys, err := newTreeFS(r.repo, r.commit)
	if err != nil {
		return s, err
	}
	if data, err := fsys.ReadFile("python/pyproject.toml"); err == nil {
		if s.Pin, err = compat.ReadPyprojectPin(data, "python/pyproject.toml"); err != nil {
			return s, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	if data, err := fsys.ReadFile("docker/Dockerfile"); err == nil {
		compat.ReadDockerfilePin(&s.Pin, data, "docker/Dockerfile")
	}
	paths, hashes, err := files(r.repo, r.commit, "python/sglang")
	if err != nil {
		return s, err
	}
	type agg struct {
		use                 compat.Use
		kw, guarded, unread []string
	}
	aggs := map[string]*agg{}
	for _, p := range paths {
		if !strings.HasSuffix(p, ".py") {
			continue
		}
		if err := ctx.Err(); err != nil {
			return s, err
		}
		h := hashes[p]
		uses, ok := g.sgUses[h]
		if !ok {
			data, err := fsys.blob(h, p)
			if err != nil {
				return s, err
			}
			uses = ReadPyUses(data, "flashinfer")
			g.sgUses[h] = uses
		}
		fusion := slices.Contains(g.src.FusionPath, p)
		for _, u := range uses {
			a := aggs[u.Path]
			if a == nil {
				a = &agg{use: compat.Use{Symbol: u.Path, At: fmt.Sprintf("%s:%d", p, u.Line), Tried: true}}
				aggs[u.Path] = a
			}
			a.use.Tried = a.use.Tried && u.Tried
			a.use.Files++
			a.use.Fusion = a.use.Fusion || fusion
			a.kw = append(a.kw, u.Kwargs...)
			a.guarded = append(a.guarded, u.Guarded...)
			a.unread = append(a.unread, u.Unread...)
		}
	}
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range aggs {
			if !yield(n) {
				return
			}
		}
	}) {
		a := aggs[n]
		a.use.Kwargs = sortedSet(a.kw)
		a.use.Guarded = slices.DeleteFunc(sortedSet(a.guarded), func(k string) bool { return slices.Contains(a.use.Kwargs, k) })
		a.use.Unread = sortedSet(a.unread)
		s.Uses = append(s.Uses, a.use)
	}
	return s, nil
}

// readFlashInfer reads one flashinfer revision: whether trtllm_comm builds
// for SM12x, and its Python package for resolving names.
func (g *compatGen) readFlashInfer(ctx context.Context, r rev) (compat.FlashInfer, *pyPackage, error) {
	f := compat.FlashInfer{Revision: r.rev}
	fsys, err := newTreeFS(r.repo, r.commit)
	if err != nil {
		return f, nil, err
	}
	if f.Fusion, err = fusionOf(ctx, fsys); err != nil {
		return f, nil, err
	}
	dir := "flashinfer"
	if _, err := fsys.Stat("flashinfer/__init__.py"); err != nil {
		if _, err := fsys.Stat("python/flashinfer/__init__.py"); err == nil {
			dir = "python/flashinfer"
		}
	}
	paths, hashes, err := files(r.repo, r.commit, dir)
	if err != nil {
		return f, nil, err
	}
	pkg := newPyPackage("flashinfer", dir, paths, nil)
	// A module is parsed once per blob (and name: relative imports
	// depend on it), whatever the number of revisions that share it.
	pkg.load = func(mod, file string, isPkg bool) (*pyModule, error) {
		k := modKey{hashes[file], mod}
		if m, ok := g.fiMods[k]; ok {
			return m, nil
		}
		data, err := fsys.blob(hashes[file], file)
		if err != nil {
			return nil, err
		}
		m := readPyModule(data, mod, isPkg)
		g.fiMods[k] = m
		return m, nil
	}
	return f, pkg, nil
}

// fusionOf is probe's verdict on flashinfer's trtllm_comm for SM12x,
// read from the tree as probe reads an installed flashinfer.
func fusionOf(ctx context.Context, fsys fs.FS) (compat.Fusion, error) {
	fu := compat.Fusion{Verdict: compat.Unknown, Reasons: []string{}}
	r, err := probe.Static(ctx, fsys, []string{"."})
	if err != nil {
		return fu, err
	}
	if r.FlashInfer == nil {
		fu.Reasons = append(fu.Reasons, "no flashinfer/jit package in the tree")
		return fu, nil
	}
	v := probe.ModuleVerdict(r.FlashInfer, fusionModule, fusionMajor)
	fu.Reasons = append(fu.Reasons, v.Reasons...)
	switch v.Verdict {
	case probe.Supported:
		fu.Verdict = compat.Yes
	case probe.UnsupportedGate, probe.UnsupportedHeader:
		fu.Verdict = compat.No
	}
	m := r.FlashInfer.Modules[fusionModule]
	if m == nil {
		return fu, nil
	}
	switch {
	case m.Gate == "supported_major_versions" && len(m.Gates) <= 1:
		fu.Gate = fmt.Sprintf("%s: supported_major_versions=%s", m.Source, intsText(m.SMMajors))
	default:
		fu.Gate = fmt.Sprintf("%s: %s", m.Source, m.Gate)
	}
	for _, h := range r.FlashInfer.HeaderExclusions {
		if slices.Contains(m.Headers, path.Base(h.File)) && h.FromMajor <= fusionMajor {
			if fu.Guards == 0 {
				fu.GuardAt = fmt.Sprintf("%s:%d", h.File, h.Line)
			}
			fu.Guards++
		}
	}
	return fu, nil
}

// runsOf folds one name's resolutions (one per flashinfer revision, in
// order) into runs of equal ones.
func runsOf(rs []pyResolved, fis []compat.FlashInfer) []compat.Run {
	var out []compat.Run
	for i, r := range rs {
		params := slices.Clone(r.Params)
		slices.Sort(params)
		run := compat.Run{From: fis[i].Ref, To: fis[i].Ref, State: r.State, Kind: r.Kind, File: r.File,
			Params: params, VarKw: r.VarKw, ParamsKnown: r.Known, Why: r.Why}
		if n := len(out); n > 0 && sameRun(out[n-1], run) {
			out[n-1].To = run.To
			continue
		}
		out = append(out, run)
	}
	return out
}

func sameRun(a, b compat.Run) bool {
	a.From, a.To, b.From, b.To = "", "", "", ""
	return a.State == b.State && a.Kind == b.Kind && a.File == b.File && slices.Equal(a.Params, b.Params) &&
		a.VarKw == b.VarKw && a.ParamsKnown == b.ParamsKnown && a.Why == b.Why
}

// mainPins are the commits of branch's first-parent history since since
// that changed python/pyproject.toml's flashinfer-python pin.
func mainPins(ctx context.Context, repo *git.Repository, branch string, since time.Time) ([]compat.PinChange, error) {
	h, err := gitrepo.ResolveRevision(repo, branch)
	if err != nil {
		return nil, err
	}
	var chain []*object.Commit
	for {
		if len(chain)%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		c, err := repo.CommitObject(h)
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", h, err)
		}
		chain = append(chain, lean(c))
		if c.Committer.When.Before(since) || len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	slices.Reverse(chain)
	var out []compat.PinChange
	var lastBlob plumbing.Hash
	last := ""
	for n, c := range chain {
		if n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		t, err := repo.TreeObject(c.TreeHash)
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", c.Hash, err)
		}
		e, err := t.FindEntry("python/pyproject.toml")
		if err != nil || e.Hash == lastBlob {
			continue
		}
		lastBlob = e.Hash
		fsys := &treeFS{repo: repo, root: t}
		data, err := fsys.blob(e.Hash, "python/pyproject.toml")
		if err != nil {
			return nil, err
		}
		p, err := compat.ReadPyprojectPin(data, "python/pyproject.toml")
		if err != nil || p.FlashInfer == "" || p.FlashInfer == last {
			continue
		}
		if n > 0 {
			out = append(out, compat.PinChange{Commit: c.Hash.String(), Date: c.Committer.When.UTC().Format(time.DateOnly), Subject: subject(c.Message), FlashInfer: p.FlashInfer, From: p.FlashInferFrom})
		}
		last = p.FlashInfer
	}
	return out, nil
}

func intsText(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/source"
)

// RevisionTree is one commit of an upstream repository, read straight from
// the object store: no work tree, no git binary.
type RevisionTree struct {
	repo    *git.Repository
	commit  *object.Commit
	tree    *object.Tree
	project source.Project
	url     string
	hint    *TagHint
	cache   *RevisionCache
	known   []knownDir // directories listed, for FileHash
}

// knownDir is a directory listed through the cache: its files' blob hashes.
type knownDir struct {
	prefix string // "dir/", or "" for the root
	files  []listed
}

var _ source.Tree = (*RevisionTree)(nil)

// OpenRevision returns the tree of commit in repo. url names the
// repository for people (Root is "URL@SHA").
func OpenRevision(repo *git.Repository, commit plumbing.Hash, p source.Project, url string) (*RevisionTree, error) {
	c, err := repo.CommitObject(commit)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", commit, err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("commit %s: tree: %w", commit, err)
	}
	return &RevisionTree{repo: repo, commit: c, tree: t, project: p, url: url}, nil
}

// OpenRevisionOf is OpenRevision for a commit already decoded (through any
// handle on the repository); its tree is read through repo.
func OpenRevisionOf(repo *git.Repository, c *object.Commit, p source.Project, url string) (*RevisionTree, error) {
	t, err := repo.TreeObject(c.TreeHash)
	if err != nil {
		return nil, fmt.Errorf("commit %s: tree: %w", c.Hash, err)
	}
	return &RevisionTree{repo: repo, commit: c, tree: t, project: p, url: url}, nil
}

func (t *RevisionTree) Root() string {
	if t.url == "" {
		return t.commit.Hash.String()
	}
	return t.url + "@" + t.commit.Hash.String()
}

func (t *RevisionTree) Kind() source.Kind       { return source.KindRevision }
func (t *RevisionTree) Project() source.Project { return t.project }

// CheckProject returns an error when the commit does not hold the tree's
// project (python/sglang/ for sglang, flashinfer/ for flashinfer): a URL
// given for the wrong project.
func (t *RevisionTree) CheckProject() error {
	roots := source.ProjectRoots(t.project)
	if len(roots) == 0 {
		return fmt.Errorf("unknown project %q", t.project)
	}
	dir := strings.TrimSuffix(roots[0], "/")
	if e, err := t.tree.FindEntry(dir); err != nil || e.Mode != filemode.Dir {
		return fmt.Errorf("%s is not %s: it has no %s/", t.Root(), t.project, dir)
	}
	return nil
}

// Commit is the commit the tree is read from.
func (t *RevisionTree) Commit() *object.Commit { return t.commit }

// SetCache shares c with other revisions of the same repository.
func (t *RevisionTree) SetCache(c *RevisionCache) { t.cache = c }

// ReadFile reads a repository-relative path from the commit.
func (t *RevisionTree) ReadFile(rel string) ([]byte, error) {
	if t.cache == nil {
		return readBlob(t.repo, t.tree, rel)
	}
	h, ok := t.FileHash(rel)
	if !ok {
		return readBlob(t.repo, t.tree, rel) // the error, as without a cache
	}
	if data, ok := t.cache.blob(h); ok {
		return data, nil
	}
	o, err := t.repo.Storer.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	if p, ok := o.(*packedObject); ok {
		return p.data, nil // kept by the pack reader, per pack offset
	}
	data, err := readObject(o, rel)
	if err == nil {
		t.cache.putBlob(h, data)
	}
	return data, err
}

// FileHash is the blob hash of the regular file rel, as a key for what was
// worked out from its bytes; false when rel is not a regular file.
func (t *RevisionTree) FileHash(rel string) ([20]byte, bool) {
	for _, kd := range t.known {
		if !strings.HasPrefix(rel, kd.prefix) {
			continue
		}
		name := rel[len(kd.prefix):]
		i := sort.Search(len(kd.files), func(i int) bool { return kd.files[i].name >= name })
		if i < len(kd.files) && kd.files[i].name == name {
			return kd.files[i].hash, true
		}
	}
	clean := path.Clean(rel)
	if rel == "" || clean != rel || strings.HasPrefix(clean, "../") || clean == ".." || path.IsAbs(clean) {
		return plumbing.ZeroHash, false
	}
	e, err := t.tree.FindEntry(rel)
	if err != nil || !e.Mode.IsFile() {
		return plumbing.ZeroHash, false
	}
	return e.Hash, true
}

// readBlob reads rel from tree through the repository's object store.
func readBlob(repo *git.Repository, tree *object.Tree, rel string) ([]byte, error) {
	clean := path.Clean(rel)
	if rel == "" || clean != rel || strings.HasPrefix(clean, "../") || clean == ".." || path.IsAbs(clean) {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: fs.ErrInvalid}
	}
	e, err := tree.FindEntry(rel)
	if err != nil {
		if errors.Is(err, object.ErrEntryNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
			return nil, &fs.PathError{Op: "read", Path: rel, Err: fs.ErrNotExist}
		}
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	if !e.Mode.IsFile() {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: fs.ErrNotExist}
	}
	return readBlobHash(repo, e.Hash, rel)
}

func readBlobHash(repo *git.Repository, h plumbing.Hash, rel string) ([]byte, error) {
	o, err := repo.Storer.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	return readObject(o, rel)
}

// readObject reads the contents of o, a copy of its own.
func readObject(o plumbing.EncodedObject, rel string) ([]byte, error) {
	r, err := o.Reader()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	defer r.Close()
	if o.Size() > objectLimit || o.Size() < 0 {
		return nil, &ObjectTooLargeError{What: rel, Size: o.Size()}
	}
	data := make([]byte, o.Size())
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	return data, nil
}

// ListFiles lists regular files under dir, sorted.
func (t *RevisionTree) ListFiles(dir string) ([]string, error) {
	dir = strings.Trim(dir, "/")
	tree := t.tree
	if dir != "" && dir != "." {
		sub, err := t.tree.Tree(dir)
		if err != nil {
			if errors.Is(err, object.ErrDirectoryNotFound) || errors.Is(err, object.ErrEntryNotFound) {
				return nil, &fs.PathError{Op: "list", Path: dir, Err: fs.ErrNotExist}
			}
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		tree = sub
	} else {
		dir = ""
	}
	if t.cache != nil {
		l, err := t.listCached(tree.Hash, dir)
		if err != nil {
			return nil, err
		}
		prefix := ""
		if dir != "" {
			prefix = dir + "/"
		}
		t.known = append(t.known, knownDir{prefix, l})
		return t.cache.paths(tree.Hash, prefix, l), nil
	}
	var out []string
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", dir, err)
		}
		if e.Mode != filemode.Regular && e.Mode != filemode.Executable && e.Mode != filemode.Deprecated {
			continue
		}
		if dir != "" {
			name = dir + "/" + name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// listCached lists the regular files under the tree h with their blob
// hashes, sorted by name (relative to the tree). Listings are kept per tree
// hash, so a walk over many commits decodes only the directories that
// changed.
func (t *RevisionTree) listCached(h plumbing.Hash, dir string) ([]listed, error) {
	if l, ok := t.cache.listing(h); ok {
		return l, nil
	}
	tree, err := t.repo.TreeObject(h)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []listed
	for _, e := range tree.Entries {
		switch e.Mode {
		case filemode.Dir:
			sub, err := t.listCached(e.Hash, path.Join(dir, e.Name))
			if err != nil {
				return nil, err
			}
			for _, s := range sub {
				out = append(out, listed{name: t.cache.intern(e.Name + "/" + s.name), hash: s.hash})
			}
		case filemode.Regular, filemode.Executable, filemode.Deprecated:
			out = append(out, listed{name: t.cache.intern(e.Name), hash: e.Hash})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	t.cache.putListing(h, out)
	return out, nil
}

// Version reads the version literal of the revision, else the nearest tag
// reachable from the commit that parses as a PEP 440 version.
func (t *RevisionTree) Version(ctx context.Context) (*version.Version, string, error) {
	for _, f := range source.VersionFiles(t.project) {
		data, err := t.ReadFile(f)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, "", err
		}
		s, line, ok := source.RevisionVersionLiteral(f, data)
		if !ok {
			continue
		}
		v, err := source.ParseVersion(s)
		if err != nil {
			continue
		}
		return v, fmt.Sprintf("%s:%d", f, line), nil
	}
	tag, v, dist, err := t.nearestTag(ctx)
	if err != nil {
		return nil, "", err
	}
	if v == nil {
		return nil, fmt.Sprintf("unknown: no version literal and no version tag within %d commits of %s", source.MaxTagDistance, t.commit.Hash.String()[:12]), nil
	}
	return v, tagFrom(tag, dist), nil
}

// tagFrom says where a version came from: "tag v0.5.9", "tag v0.5.9 (+3 commits)".
func tagFrom(tag string, dist int) string {
	if dist == 0 {
		return "tag " + tag
	}
	return fmt.Sprintf("tag %s (+%d commits)", tag, dist)
}

// nearestTag is the hint set by SetNearestTag, else NearestVersionTag.
func (t *RevisionTree) nearestTag(ctx context.Context) (string, *version.Version, int, error) {
	if t.hint != nil {
		return t.hint.name, t.hint.v, t.hint.dist, nil
	}
	return NearestVersionTag(ctx, t.repo, t.commit.Hash)
}

// TagHint is the answer of NearestVersionTag for one commit, worked out by
// a caller that walks history anyway (a range walk).
type TagHint struct {
	name string
	v    *version.Version
	dist int
}

// NewTagHint records tag name (a version tag, "" for none) dist commits
// behind a commit.
func NewTagHint(name string, dist int) *TagHint {
	if name == "" {
		return &TagHint{}
	}
	v, err := source.ParseVersion(name)
	if err != nil {
		return &TagHint{}
	}
	return &TagHint{name: name, v: v, dist: dist}
}

// SetNearestTag gives the tree the nearest version tag of its commit, so
// that Version does not walk history for it.
func (t *RevisionTree) SetNearestTag(h *TagHint) { t.hint = h }

// tagIndexes caches, per repository handle, commit → version tags.
var tagIndexes sync.Map // *git.Repository → *tagIndex

type tagIndex struct {
	once sync.Once
	tags map[plumbing.Hash][]string
	err  error
}

// VersionTags maps the commits of repo that carry version tags to those
// tags' names; read once per repository handle.
func VersionTags(repo *git.Repository) (map[plumbing.Hash][]string, error) {
	v, _ := tagIndexes.LoadOrStore(repo, &tagIndex{})
	ti := v.(*tagIndex)
	ti.once.Do(func() { ti.tags, ti.err = readVersionTags(repo) })
	return ti.tags, ti.err
}

// readVersionTags maps the commits of repo that carry tags parseable as
// PEP 440 versions (annotated tags peeled) to those tags' names.
func readVersionTags(repo *git.Repository) (map[plumbing.Hash][]string, error) {
	tags := map[plumbing.Hash][]string{}
	refs, err := repo.Tags()
	if err != nil {
		return nil, err
	}
	err = refs.ForEach(func(r *plumbing.Reference) error {
		name := r.Name().Short()
		if _, err := source.ParseVersion(name); err != nil {
			return nil
		}
		h, typ, err := peelObject(repo, r.Hash())
		switch {
		case err != nil && !errors.Is(err, plumbing.ErrObjectNotFound):
			return fmt.Errorf("tag %s: %w", name, err) // a damaged object, a named pipe
		case err == nil && typ == plumbing.CommitObject:
			tags[h] = append(tags[h], name)
		}
		return nil
	})
	return tags, err
}

// NearestVersionTag finds the version tag reachable from commit with the
// fewest steps back in history (on a tie, the highest version), at most
// source.MaxTagDistance steps back, and how many steps that is. It returns
// ("", nil, 0, nil) when no version tag is that close.
func NearestVersionTag(ctx context.Context, repo *git.Repository, commit plumbing.Hash) (string, *version.Version, int, error) {
	tags, err := VersionTags(repo)
	if err != nil {
		return "", nil, 0, fmt.Errorf("tags: %w", err)
	}
	if len(tags) == 0 {
		return "", nil, 0, nil
	}
	name, v, dist, err := walkToTag(ctx, repo, tags, commit, 0)
	if err != nil || v == nil || dist > source.MaxTagDistance {
		return "", nil, 0, err
	}
	return name, v, dist, nil
}

// walkToTag walks history back from start one step at a time (every
// parent of the commits one step back is two steps back) to the nearest
// step with a commit carrying one of tags: the highest version there, and
// the number of steps. It reads at most maxCommits commits, or with 0
// goes no further than source.MaxTagDistance steps; nil when no tag is
// found within that. A commit missing from the store (a shallow clone's
// boundary) ends its line.
func walkToTag(ctx context.Context, repo *git.Repository, tags map[plumbing.Hash][]string, start plumbing.Hash, maxCommits int) (string, *version.Version, int, error) {
	seen := map[plumbing.Hash]bool{start: true}
	level := []plumbing.Hash{start}
	for dist := 0; len(level) > 0; dist++ {
		if err := ctx.Err(); err != nil {
			return "", nil, 0, err
		}
		if name, v := bestTag(tags, level); v != nil {
			return name, v, dist, nil
		}
		if maxCommits == 0 && dist == source.MaxTagDistance || maxCommits > 0 && len(seen) >= maxCommits {
			break
		}
		var next []plumbing.Hash
		for _, h := range level {
			c, err := repo.CommitObject(h)
			if err != nil {
				if errors.Is(err, plumbing.ErrObjectNotFound) {
					continue // shallow boundary
				}
				return "", nil, 0, fmt.Errorf("git commit %s: %w", h, err)
			}
			for _, p := range c.ParentHashes {
				if !seen[p] {
					seen[p] = true
					next = append(next, p)
				}
			}
		}
		level = next
	}
	return "", nil, 0, nil
}

// bestTag is the highest version tag on any of hs.
func bestTag(tags map[plumbing.Hash][]string, hs []plumbing.Hash) (string, *version.Version) {
	var best string
	var bestV *version.Version
	for _, h := range hs {
		for _, name := range tags[h] {
			v, _ := source.ParseVersion(name)
			if bestV == nil || source.ComparePEP440(v, bestV) > 0 {
				best, bestV = name, v
			}
		}
	}
	return best, bestV
}

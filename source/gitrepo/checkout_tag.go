package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
	"github.com/hashicorp/go-version"
	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/source"
)

// OpenGitStorage opens the object and reference store of the git
// repository holding dir (dir itself, or the nearest parent with a .git
// directory or file), and returns it with the work tree's root. A linked
// work tree's .git file ("gitdir: ...") and its commondir are followed,
// so HEAD is the work tree's own and refs, tags and objects are the
// shared ones. A repository that borrows objects from another through
// objects/info/alternates, as `git clone --shared` and `git clone
// --reference` make, reads those objects too (go-git alone resolves an
// absolute alternate path inside the repository's own directory and finds
// nothing); a relative alternate is refused by name.
func OpenGitStorage(dir string) (storage.Storer, billy.Filesystem, error) {
	dot, wt, err := findDotGit(dir)
	if err != nil {
		return nil, nil, err
	}
	common, err := gitCommonDir(dot)
	if err != nil {
		return nil, nil, err
	}
	var repoFS billy.Filesystem = dot
	if common != nil {
		repoFS = dotgit.NewRepositoryFilesystem(dot, common)
	}
	dirs := []string{dot.Root()}
	if common != nil {
		dirs = append(dirs, common.Root())
	}
	if err := checkRefFiles(dirs); err != nil {
		return nil, nil, err
	}
	alts, err := readAlternates(repoFS)
	if err != nil {
		return nil, nil, err
	}
	st := filesystem.NewStorage(regularFS{repoFS}, cache.NewObjectLRU(storeCacheBytes))
	if len(alts) == 0 {
		return st, wt, nil
	}
	ws := &withAlternates{Storage: st}
	for _, a := range alts {
		if !filepath.IsAbs(a) {
			return nil, nil, fmt.Errorf("%s: alternate object directory %q is relative; smpatch reads only absolute alternates (git clone --shared and --reference write absolute ones)", repoFS.Join(repoFS.Root(), "objects/info/alternates"), a)
		}
		// An alternate names an objects directory; its store is the
		// directory above it.
		ws.alts = append(ws.alts, filesystem.NewStorage(regularFS{osfs.New(filepath.Dir(filepath.Clean(a)))}, cache.NewObjectLRU(storeCacheBytes)))
	}
	return ws, wt, nil
}

// storeCacheBytes bounds go-git's object cache of a store OpenGitStorage
// opens, and of each alternate's (go-git's default is 96 MB each): its
// readers walk history once (the nearest tag, a revision to resolve), and a
// range walk reads through its own caches (RevisionCache.ReadPacks).
const storeCacheBytes = 4 * cache.MiByte

// withAlternates is a store that also reads the objects of its alternate
// object directories, each opened once. (go-git's own alternates support
// opens an alternate's store again, pack index included, for every object
// it looks up there: 10 s to read the tags of an sglang clone made with
// git clone --shared, against 0.2 s for a plain clone.)
type withAlternates struct {
	*filesystem.Storage
	alts []*filesystem.Storage
}

func (s *withAlternates) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o, err := s.Storage.EncodedObject(t, h)
	if !errors.Is(err, plumbing.ErrObjectNotFound) {
		return o, err
	}
	for _, a := range s.alts {
		o, err := a.EncodedObject(t, h)
		if !errors.Is(err, plumbing.ErrObjectNotFound) {
			return o, err
		}
	}
	return nil, plumbing.ErrObjectNotFound
}

func (s *withAlternates) HasEncodedObject(h plumbing.Hash) error {
	err := s.Storage.HasEncodedObject(h)
	if !errors.Is(err, plumbing.ErrObjectNotFound) {
		return err
	}
	for _, a := range s.alts {
		if err := a.HasEncodedObject(h); !errors.Is(err, plumbing.ErrObjectNotFound) {
			return err
		}
	}
	return plumbing.ErrObjectNotFound
}

func (s *withAlternates) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	n, err := s.Storage.EncodedObjectSize(h)
	if !errors.Is(err, plumbing.ErrObjectNotFound) {
		return n, err
	}
	for _, a := range s.alts {
		if n, err := a.EncodedObjectSize(h); !errors.Is(err, plumbing.ErrObjectNotFound) {
			return n, err
		}
	}
	return 0, plumbing.ErrObjectNotFound
}

// findDotGit walks from dir up to the root for a .git directory or file and
// returns the git directory and the work tree.
func findDotGit(dir string) (dot, wt billy.Filesystem, err error) {
	root, err := source.FindGitRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	wt = osfs.New(root)
	if fi, err := os.Stat(filepath.Join(root, ".git")); err == nil && fi.IsDir() {
		return osfs.New(filepath.Join(root, ".git")), wt, nil
	}
	dot, err = dotGitFile(root)
	if err != nil {
		return nil, nil, err
	}
	return dot, wt, nil
}

// dotGitFile follows the "gitdir: PATH" line of the .git file in dir (a
// linked work tree or a submodule); a relative PATH is relative to dir.
func dotGitFile(dir string) (billy.Filesystem, error) {
	name := filepath.Join(dir, ".git")
	b, err := bounded.ReadFile(nil, name, 64<<10) // a regular file, opened without blocking
	if err != nil {
		return nil, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	const prefix = "gitdir: "
	if !strings.HasPrefix(line, prefix) {
		return nil, fmt.Errorf("%s: .git file has no %q line", name, prefix)
	}
	gitdir := strings.TrimSpace(line[len(prefix):])
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(dir, gitdir)
	}
	if _, err := os.Stat(gitdir); err != nil {
		return nil, fmt.Errorf("%s: gitdir %s: %w", name, gitdir, err)
	}
	return osfs.New(gitdir), nil
}

// gitCommonDir is the directory named by dot's commondir file (a linked
// work tree's refs, objects and config), nil when there is none.
func gitCommonDir(dot billy.Filesystem) (billy.Filesystem, error) {
	name := filepath.Join(dot.Root(), "commondir")
	b, err := bounded.ReadFile(nil, name, 64<<10) // a regular file, opened without blocking
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	path := strings.TrimSpace(string(b))
	if path == "" {
		return nil, nil
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dot.Root(), path)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s: common directory %s: %w", name, path, err)
	}
	return osfs.New(path), nil
}

// checkRefFiles refuses a git directory whose HEAD, packed-refs, config,
// objects/info/alternates or a loose ref is there but not a regular file
// (a named pipe, a device): go-git would open it and wait for good.
func checkRefFiles(dirs []string) error {
	check := func(p string) error {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode().IsRegular() || fi.IsDir() {
			return nil
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if fi, err = os.Stat(p); err != nil || fi.Mode().IsRegular() || fi.IsDir() {
				return nil
			}
		}
		return fmt.Errorf("%s: not a regular file (%s): git repository not read", p, bounded.Kind(fi.Mode()))
	}
	for _, d := range dirs {
		for _, f := range []string{"HEAD", "packed-refs", "config", "commondir", "objects/info/alternates"} {
			if err := check(filepath.Join(d, f)); err != nil {
				return err
			}
		}
		refs := filepath.Join(d, "refs")
		err := filepath.WalkDir(refs, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil // unreadable: go-git says so when it reads it
			}
			if e.IsDir() {
				return nil
			}
			return check(p)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// readAlternates lists the object directories named in
// objects/info/alternates (none when the file is absent), a file of at
// most 64 KiB.
func readAlternates(dot billy.Filesystem) ([]string, error) {
	name := dot.Join("objects", "info", "alternates")
	f, err := dot.Open(name)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	data, err := bounded.ReadAll(f, 64<<10, dot.Join(dot.Root(), name))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out, nil
}

// maxTagWalk bounds the commits NearestTag reads looking for a tag, so that
// it can say how far behind HEAD the nearest one is when that is more than
// source.MaxTagDistance.
const maxTagWalk = 200000

// NearestTag opens the git repository holding dir and finds the nearest
// commit from HEAD that carries a tag parseable as a PEP 440 version, at
// most source.MaxTagDistance commits back (on a tie, the highest version).
// It is the source.TagReader of a checkout.
func NearestTag(ctx context.Context, dir string) (*version.Version, string, error) {
	repo, err := Open(dir)
	if err != nil {
		return nil, "", fmt.Errorf("no git repository: %v", err)
	}
	head, err := repo.Head()
	if err != nil {
		return nil, "", fmt.Errorf("git HEAD: %v", err)
	}
	tags, err := readVersionTags(repo)
	if err != nil {
		return nil, "", fmt.Errorf("git tags: %v", err)
	}
	if len(tags) == 0 {
		return nil, "", errors.New("git repository has no version tags")
	}
	name, v, dist, err := walkToTag(ctx, repo, tags, head.Hash(), maxTagWalk)
	switch {
	case err != nil:
		return nil, "", err
	case v == nil:
		return nil, "", errors.New("no tagged commit reachable from HEAD")
	case dist > source.MaxTagDistance:
		return nil, "", fmt.Errorf("nearest version tag %s is %d commits behind HEAD, more than %d: too far to name the code", name, dist, source.MaxTagDistance)
	}
	return v, "git " + tagFrom(name, dist), nil
}

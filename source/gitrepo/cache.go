package gitrepo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/gofrs/flock"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/source"
)

// DefaultURL is the public repository of a known project, "" for others.
func DefaultURL(p source.Project) string {
	switch p {
	case source.SGLang:
		return "https://github.com/sgl-project/sglang"
	case source.FlashInfer:
		return "https://github.com/flashinfer-ai/flashinfer"
	}
	return ""
}

// ParseProject accepts the name of a known project.
func ParseProject(s string) (source.Project, error) {
	switch source.Project(s) {
	case source.SGLang, source.FlashInfer:
		return source.Project(s), nil
	}
	return "", fmt.Errorf("unknown project %q (want %s or %s)", s, source.SGLang, source.FlashInfer)
}

// DefaultCacheDir is where upstream repositories are cached:
// $XDG_CACHE_HOME/smpatch/repos, else the user cache directory's smpatch/repos.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "smpatch", "repos"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: %w (set XDG_CACHE_HOME)", err)
	}
	return filepath.Join(d, "smpatch", "repos"), nil
}

// RepoCache is the on-disk cache of upstream repositories: one bare
// repository per URL, fetched incrementally (branches and tags), guarded by a
// file lock so that concurrent smpatch processes do not fetch into the same
// repository at once.
type RepoCache struct {
	Dir string
	// Progress receives the remote's progress messages (nil: none).
	Progress io.Writer
	// Notice receives one-line notes for people, such as a corrupt cache being
	// rebuilt (nil: none).
	Notice io.Writer
}

// NewRepoCache returns a cache rooted at dir ("" for DefaultCacheDir).
func NewRepoCache(dir string) (*RepoCache, error) {
	if err := NetTimeoutFromEnv(); err != nil {
		return nil, err
	}
	if dir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	return &RepoCache{Dir: dir}, nil
}

var slugUnsafe = lazyre.New(`[^A-Za-z0-9._-]+`)

// CacheSlug is the directory name of url's repository in the cache: the URL
// made readable (scheme and credentials dropped) and a short hash of the
// whole URL, so that two URLs never share a directory.
func CacheSlug(url string) string {
	sum := sha256.Sum256([]byte(url))
	s := url
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	// Drop user and credentials: what comes before an '@' in the host part.
	if at := strings.Index(s, "@"); at >= 0 {
		if slash := strings.Index(s, "/"); slash < 0 || at < slash {
			s = s[at+1:]
		}
	}
	s = strings.TrimSuffix(strings.TrimSuffix(s, "/"), ".git")
	s = strings.Trim(slugUnsafe().ReplaceAllString(s, "-"), "-.")
	if len(s) > 80 {
		s = s[len(s)-80:]
	}
	if s == "" {
		s = "repo"
	}
	return s + "-" + hex.EncodeToString(sum[:])[:10]
}

// Upstream is one cached repository opened for reading.
type Upstream struct {
	URL  string
	Path string // the bare repository on disk
	Repo *git.Repository
	// Fetched is true when this process fetched from the remote.
	Fetched bool

	cache *RepoCache
}

var refSpecs = []config.RefSpec{
	"+refs/heads/*:refs/heads/*",
	"+refs/tags/*:refs/tags/*",
}

// ErrUnknownRevision is wrapped by errors for a revision the repository does not have.
var ErrUnknownRevision = errors.New("unknown revision")

// Open returns the cached repository of url, cloning it when it is not
// cached yet. It does not fetch an existing repository: Resolve does, when
// the revision asked for is not already there.
func (c *RepoCache) Open(ctx context.Context, url string) (*Upstream, error) {
	if url == "" {
		return nil, errors.New("empty repository URL")
	}
	setupTransports()
	path := filepath.Join(c.Dir, CacheSlug(url))
	u := &Upstream{URL: url, Path: path, cache: c}
	err := u.locked(func() error {
		repo, err := c.openOrInit(ctx, url, path)
		if err != nil {
			return err
		}
		u.Repo = repo
		if empty, err := isEmpty(repo); err != nil {
			return err
		} else if empty {
			if err := u.fetch(ctx); err != nil {
				// Leave no half-made repository behind.
				_ = os.RemoveAll(path)
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// openOrInit opens path, rebuilding it when it is corrupt.
func (c *RepoCache) openOrInit(ctx context.Context, url, path string) (*git.Repository, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return initBare(path, url)
	}
	repo, err := openStore(path)
	if err == nil {
		err = verify(repo, url)
	}
	if err == nil {
		return repo, nil
	}
	c.notice("cache %s is corrupt (%v); removed it, fetching %s again", path, err, url)
	if rerr := os.RemoveAll(path); rerr != nil {
		return nil, fmt.Errorf("cache %s is corrupt (%v) and could not be removed: %w; remove it by hand", path, err, rerr)
	}
	return initBare(path, url)
}

func (c *RepoCache) notice(format string, args ...any) {
	if c.Notice != nil {
		fmt.Fprintf(c.Notice, "smpatch: "+format+"\n", args...)
	}
}

// OpenStore opens the cached repository at path for reading, keeping its
// packfiles open between reads: a range walk reads thousands of objects.
// Each handle is for one goroutine at a time.
func OpenStore(path string) (*git.Repository, error) { return openStore(path) }

func openStore(path string) (*git.Repository, error) {
	if _, err := os.Stat(filepath.Join(path, "config")); err != nil {
		return nil, fmt.Errorf("%s: %w", path, git.ErrRepositoryNotExists)
	}
	// A small object cache: a range walk keeps its own cache of file
	// contents (RevisionCache), and each worker opens a handle.
	st := filesystem.NewStorageWithOptions(osfs.New(path), cache.NewObjectLRU(4*cache.MiByte), filesystem.Options{KeepDescriptors: true})
	return git.Open(&guardedStorage{Storage: st, root: path}, nil)
}

func initBare(path, url string) (*git.Repository, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	repo, err := git.PlainInit(path, true)
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", path, err)
	}
	_, err = repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{url}, Fetch: refSpecs})
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", path, err)
	}
	return openStore(path)
}

// verify checks that the repository is the one for url and that every
// reference points to an object that can be read.
func verify(repo *git.Repository, url string) error {
	rem, err := repo.Remote("origin")
	if err != nil {
		return fmt.Errorf("no origin remote: %w", err)
	}
	if urls := rem.Config().URLs; len(urls) != 1 || urls[0] != url {
		return fmt.Errorf("origin is %v, not %s", urls, url)
	}
	refs, err := repo.References()
	if err != nil {
		return err
	}
	defer refs.Close()
	return refs.ForEach(func(r *plumbing.Reference) error {
		if r.Type() != plumbing.HashReference {
			return nil
		}
		// The index says whether the object is there, without inflating
		// it: damaged bytes are found when a revision is read.
		if err := repo.Storer.HasEncodedObject(r.Hash()); err != nil {
			return fmt.Errorf("%s -> %s: %w", r.Name(), r.Hash(), err)
		}
		return nil
	})
}

func isEmpty(repo *git.Repository) (bool, error) {
	refs, err := repo.References()
	if err != nil {
		return false, err
	}
	defer refs.Close()
	empty := true
	err = refs.ForEach(func(r *plumbing.Reference) error {
		if r.Type() == plumbing.HashReference {
			empty = false
			return io.EOF
		}
		return nil
	})
	if err == io.EOF {
		err = nil
	}
	return empty, err
}

// locked runs f holding the repository's lock file, <slug>.lock beside the
// repository. When f fails and leaves no repository behind (a first fetch
// that failed), the lock file is removed too, while still held: a process
// that was waiting for it sees that the file it locked is no longer the one
// at the path, and locks afresh.
func (u *Upstream) locked(f func() error) error {
	if err := os.MkdirAll(u.cache.Dir, 0o755); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	lockPath := u.Path + ".lock"
	var l *flock.Flock
	for {
		l = flock.New(lockPath)
		if err := l.Lock(); err != nil {
			return fmt.Errorf("cache lock %s: %w", lockPath, err)
		}
		held, herr := l.Stat()
		cur, cerr := os.Stat(lockPath)
		if herr == nil && cerr == nil && os.SameFile(held, cur) {
			break
		}
		// Removed (or replaced) by its holder after we opened it.
		_ = l.Close()
		if herr != nil {
			return fmt.Errorf("cache lock %s: %w", lockPath, herr)
		}
	}
	defer l.Close()
	err := f()
	if err != nil {
		if _, serr := os.Stat(u.Path); errors.Is(serr, os.ErrNotExist) {
			_ = os.Remove(lockPath)
		}
	}
	return err
}

// Fetch brings every branch and tag of the remote into the cache; only the
// objects the cache lacks are transferred.
func (u *Upstream) Fetch(ctx context.Context) error {
	return u.locked(func() error { return u.fetch(ctx) })
}

func (u *Upstream) fetch(ctx context.Context) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, maxFetchTime)
	defer cancel()
	err := u.Repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   refSpecs,
		Tags:       git.AllTags,
		Force:      true,
		Progress:   u.cache.Progress,
	})
	switch {
	case err == nil:
		u.Fetched = true
		// One packed-refs file instead of a file per tag and branch: every
		// later open reads them all.
		if err := u.Repo.Storer.PackRefs(); err != nil {
			return fmt.Errorf("cache %s: pack refs: %w", u.Path, err)
		}
		return nil
	case errors.Is(err, git.NoErrAlreadyUpToDate):
		u.Fetched = true
		return nil
	case parent.Err() != nil:
		return parent.Err() // the caller's cancel or deadline
	case isTimeout(err):
		if ctx.Err() != nil {
			return fmt.Errorf("remote %s: fetch from %s did not finish within %s", u.URL, remoteHost(u.URL), maxFetchTime)
		}
		return fmt.Errorf("remote %s: %s did not answer within %s (set SMPATCH_NET_TIMEOUT to wait longer)", u.URL, remoteHost(u.URL), NetTimeout())
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, transport.ErrRepositoryNotFound), errors.Is(err, transport.ErrEmptyRemoteRepository):
		return fmt.Errorf("remote %s: %w", u.URL, err)
	case isA[*ObjectTooLargeError](err):
		return fmt.Errorf("remote %s: fetch refused: %w", u.URL, err)
	}
	return remoteError(u.URL, err)
}

// remoteError is a failed fetch that is none of the cases above: an error
// the remote itself sent (go-git's "unexpected error: " from the side band,
// a fatal message of git-upload-pack, often ending in a NUL or a newline),
// or a remote that could not be reached.
func remoteError(url string, err error) error {
	if msg, ok := strings.CutPrefix(err.Error(), "unexpected error: "); ok {
		msg = strings.TrimRight(msg, "\x00\r\n\t ")
		return fmt.Errorf("remote %s refused the fetch: %s", url, msg)
	}
	return fmt.Errorf("remote %s unreachable: %w", url, err)
}

// Resolve turns rev (a tag, a branch, a full or short commit SHA, or a
// revision expression such as v0.6.0~2) into a commit. A full SHA or a tag
// already in the cache is used without contacting the remote; anything else
// is fetched first, so a branch name means the remote's branch as it is now.
func (u *Upstream) Resolve(ctx context.Context, rev string) (plumbing.Hash, error) {
	if rev == "" {
		return plumbing.ZeroHash, errors.New("empty revision")
	}
	if h, ok := resolveLocal(u.Repo, rev, true); ok {
		return h, nil
	}
	if !u.Fetched {
		if err := u.Fetch(ctx); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	if h, ok := resolveLocal(u.Repo, rev, false); ok {
		return h, nil
	}
	if err := unreadableRef(u.Repo, rev); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("cache %s is corrupt: %v; remove it (rm -rf %s) and run again to fetch it afresh", u.Path, err, u.Path)
	}
	return plumbing.ZeroHash, unknownRevision(u.Repo, rev, u.URL)
}

// unreadableRef returns why rev, a reference the repository has, cannot be
// followed to a commit (a damaged or missing object), or nil.
func unreadableRef(repo *git.Repository, rev string) error {
	for _, name := range []plumbing.ReferenceName{
		plumbing.NewTagReferenceName(rev),
		plumbing.NewBranchReferenceName(rev),
		plumbing.NewRemoteReferenceName("origin", rev),
	} {
		ref, err := repo.Reference(name, true)
		if err != nil {
			continue
		}
		h := ref.Hash()
		for i := 0; i < 10; i++ {
			o, err := repo.Storer.EncodedObject(plumbing.AnyObject, h)
			if err != nil {
				return fmt.Errorf("%s -> %s: %w", name, h, err)
			}
			switch o.Type() {
			case plumbing.CommitObject:
				if _, err := object.DecodeCommit(repo.Storer, o); err != nil {
					return fmt.Errorf("%s -> commit %s: %w", name, h, err)
				}
				return nil
			case plumbing.TagObject:
				tg, err := object.DecodeTag(repo.Storer, o)
				if err != nil {
					return fmt.Errorf("%s -> tag %s: %w", name, h, err)
				}
				h = tg.Target
				continue
			}
			return nil // points at something else: not corruption
		}
		return nil
	}
	return nil
}

// ResolveRevision resolves rev in repo without fetching.
func ResolveRevision(repo *git.Repository, rev string) (plumbing.Hash, error) {
	if h, ok := resolveLocal(repo, rev, false); ok {
		return h, nil
	}
	return plumbing.ZeroHash, unknownRevision(repo, rev, "")
}

var fullSHA = lazyre.New(`^[0-9a-f]{40}$`)

// resolveLocal resolves rev from what the repository holds. With stableOnly,
// only names that cannot move (a full SHA, a tag) resolve.
func resolveLocal(repo *git.Repository, rev string, stableOnly bool) (plumbing.Hash, bool) {
	if fullSHA().MatchString(rev) {
		h := plumbing.NewHash(rev)
		if c, err := repo.CommitObject(h); err == nil {
			return c.Hash, true
		}
		return plumbing.ZeroHash, false
	}
	if ref, err := repo.Reference(plumbing.NewTagReferenceName(rev), true); err == nil {
		if h, ok := peel(repo, ref.Hash()); ok {
			return h, true
		}
	}
	if stableOnly {
		return plumbing.ZeroHash, false
	}
	// go-git resolves as git rev-parse does: a short SHA, then refs, tags,
	// branches and remotes by name, then ~N and ^N. The cache holds the
	// remote's branches as its own, so origin/NAME is NAME there.
	for _, r := range []string{rev, strings.TrimPrefix(rev, "origin/")} {
		if h, err := repo.ResolveRevision(plumbing.Revision(r)); err == nil {
			if c, err := repo.CommitObject(*h); err == nil {
				return c.Hash, true
			}
		}
	}
	return plumbing.ZeroHash, false
}

// peel follows annotated tags to the commit.
func peel(repo *git.Repository, h plumbing.Hash) (plumbing.Hash, bool) {
	h, typ, err := peelObject(repo, h)
	return h, err == nil && typ == plumbing.CommitObject
}

// peelObject follows annotated tags from h (at most 10) to what they name:
// its hash and type; the error is why an object could not be read
// (plumbing.ErrObjectNotFound for one the store does not have).
func peelObject(repo *git.Repository, h plumbing.Hash) (plumbing.Hash, plumbing.ObjectType, error) {
	for i := 0; i < 10; i++ {
		o, err := repo.Storer.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return plumbing.ZeroHash, plumbing.InvalidObject, err
		}
		switch o.Type() {
		case plumbing.CommitObject:
			if _, err := object.DecodeCommit(repo.Storer, o); err != nil {
				return plumbing.ZeroHash, plumbing.InvalidObject, err
			}
			return h, plumbing.CommitObject, nil
		case plumbing.TagObject:
			t, err := object.DecodeTag(repo.Storer, o)
			if err != nil {
				return plumbing.ZeroHash, plumbing.InvalidObject, err
			}
			h = t.Target
		default:
			return h, o.Type(), nil
		}
	}
	return plumbing.ZeroHash, plumbing.InvalidObject, errors.New("more than 10 tags in a chain")
}

// notACommit is the error for a tag that names a tree or a blob: it is
// an unknown revision, said as what it is.
type notACommit struct {
	tag, kind, where string
}

func (e *notACommit) Error() string {
	return fmt.Sprintf("tag %q%s names a %s, not a commit", e.tag, e.where, e.kind)
}

func (e *notACommit) Unwrap() error { return ErrUnknownRevision }

// unknownRevision builds the error for rev: a tag that names a tree or a
// blob said so, a tag whose object cannot be read said why, else naming
// close tags or branches.
func unknownRevision(repo *git.Repository, rev, url string) error {
	where := ""
	if url != "" {
		where = " in " + url
	}
	if ref, err := repo.Reference(plumbing.NewTagReferenceName(rev), true); err == nil {
		_, typ, err := peelObject(repo, ref.Hash())
		switch {
		case err == nil && typ != plumbing.CommitObject:
			return &notACommit{tag: rev, kind: typ.String(), where: where}
		case err != nil && !errors.Is(err, plumbing.ErrObjectNotFound):
			// The tag is there but its object could not be read (a
			// named pipe, a corrupt pack): not an unknown revision.
			return fmt.Errorf("tag %q%s: %w", rev, where, err)
		}
	}
	var names []string
	if refs, err := repo.References(); err == nil {
		_ = refs.ForEach(func(r *plumbing.Reference) error {
			n := r.Name()
			if n.IsTag() || n.IsBranch() {
				s := n.Short()
				if s == rev {
					return nil // never "did you mean" the name asked for
				}
				if strings.HasPrefix(s, rev) || strings.HasPrefix(rev, s) && len(s) > 1 {
					names = append(names, s)
				}
			}
			return nil
		})
	}
	sort.Strings(names)
	if len(names) > 5 {
		names = names[:5]
	}
	if len(names) > 0 {
		return fmt.Errorf("%w %q%s (did you mean %s?)", ErrUnknownRevision, rev, where, strings.Join(names, ", "))
	}
	return fmt.Errorf("%w %q%s", ErrUnknownRevision, rev, where)
}

var transportsOnce sync.Once

// setupTransports serves file:// URLs in process when no git binary is
// installed (go-git's file transport runs git-upload-pack otherwise).
func setupTransports() {
	transportsOnce.Do(func() {
		installNetTransports()
		if _, err := exec.LookPath("git-upload-pack"); err == nil {
			return
		}
		if _, err := exec.LookPath("git"); err == nil {
			return
		}
		client.InstallProtocol("file", server.DefaultServer)
	})
}

// Checkout writes the tree of commit into dir, which must be empty or
// absent, as a git work tree: dir/.git is a self-contained repository holding
// that one commit (shallow, like a clone of depth 1), HEAD detached at it,
// the tag tag when tag is not "", and origin set to the upstream URL. On
// failure nothing is left behind in dir.
func (u *Upstream) Checkout(ctx context.Context, commit plumbing.Hash, dir, tag string) (err error) {
	created, err := prepareEmptyDir(dir)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			cleanDir(dir, created)
		}
	}()
	c, err := u.Repo.CommitObject(commit)
	if err != nil {
		return fmt.Errorf("commit %s: %w", commit, err)
	}
	hashes, err := snapshotObjects(ctx, u.Repo, c)
	if err != nil {
		return err
	}
	var tagRef *plumbing.Reference
	if tag != "" {
		if r, err := u.Repo.Reference(plumbing.NewTagReferenceName(tag), true); err == nil {
			if h, ok := peel(u.Repo, r.Hash()); ok && h == commit {
				tagRef = plumbing.NewHashReference(r.Name(), r.Hash())
				if r.Hash() != commit {
					hashes = append(hashes, r.Hash())
				}
			}
		}
	}
	// A bound file system writes symbolic links as the tree records them
	// (go-git's default rewrites an absolute target into the work tree) and
	// never writes through a link to outside dir.
	wtFS := osfs.New(dir, osfs.WithBoundOS())
	dotFS := osfs.New(filepath.Join(dir, git.GitDirName), osfs.WithBoundOS())
	dst, err := git.Init(filesystem.NewStorage(dotFS, cache.NewObjectLRUDefault()), wtFS)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	pw, ok := dst.Storer.(storer.PackfileWriter)
	if !ok {
		return errors.New("repository storage cannot write packfiles")
	}
	w, err := pw.PackfileWriter()
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if _, err := packfile.NewEncoder(w, u.Repo.Storer, false).Encode(hashes, 0); err != nil {
		w.Close()
		return fmt.Errorf("%s: write objects: %w", dir, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("%s: write objects: %w", dir, err)
	}
	if len(c.ParentHashes) > 0 {
		if err := dst.Storer.SetShallow([]plumbing.Hash{commit}); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	if _, err := dst.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{u.URL}}); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if tagRef != nil {
		if err := dst.Storer.SetReference(tagRef); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	if err := dst.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, commit)); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	wt, err := dst.Worktree()
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if err := wt.Checkout(&git.CheckoutOptions{Hash: commit, Force: true}); err != nil {
		return fmt.Errorf("%s: checkout: %w", dir, err)
	}
	return nil
}

// snapshotObjects lists the commit, its tree, every subtree and every blob
// (submodule commits are not ours to copy); a blob larger than
// objectLimit, by the size the store gives before reading it, is refused.
func snapshotObjects(ctx context.Context, repo *git.Repository, c *object.Commit) ([]plumbing.Hash, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("commit %s: tree: %w", c.Hash, err)
	}
	seen := map[plumbing.Hash]bool{c.Hash: true, tree.Hash: true}
	hashes := []plumbing.Hash{c.Hash, tree.Hash}
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		name, e, err := w.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", c.Hash, err)
		}
		if e.Mode == filemode.Submodule || seen[e.Hash] {
			continue
		}
		if e.Mode.IsFile() {
			if err := checkBlobSize(repo, e.Hash, name); err != nil {
				return nil, err
			}
		}
		seen[e.Hash] = true
		hashes = append(hashes, e.Hash)
	}
	return hashes, nil
}

// prepareEmptyDir makes sure dir is an empty directory, creating it (and
// reporting so) when it does not exist.
func prepareEmptyDir(dir string) (created bool, err error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return false, err
		}
		return true, nil
	case err != nil:
		return false, err
	case len(entries) > 0:
		return false, fmt.Errorf("%s: directory not empty (%d entries); choose an empty or new directory", dir, len(entries))
	}
	return false, nil
}

// cleanDir undoes a failed checkout: removes dir if we created it, else
// empties it again.
func cleanDir(dir string, created bool) {
	if created {
		_ = os.RemoveAll(dir)
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

func isA[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

// checkBlobSize refuses the blob h (the file rel) when the object store
// says it is larger than objectLimit, before anything of it is read.
func checkBlobSize(repo *git.Repository, h plumbing.Hash, rel string) error {
	n, err := repo.Storer.EncodedObjectSize(h)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if n > objectLimit {
		return &ObjectTooLargeError{What: rel, Size: n}
	}
	return nil
}

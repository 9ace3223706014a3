package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/plumbing/transport/file"
	"github.com/go-git/go-git/v5/plumbing/transport/server"

	"github.com/smpatch/smpatch/internal/testkit/gitbuild"
)

// upstreamRepo builds a small sglang-shaped history (python/sglang/...):
// a release tagged v0.5.6.post2 (annotated), a later commit, and a
// pre-release tag v0.5.7rc1 on a commit whose version.py is gone (the
// setuptools-scm shape), so that its version comes from the tag.
func upstreamRepo(t *testing.T) (*gitbuild.Builder, map[string]plumbing.Hash) {
	t.Helper()
	b, err := gitbuild.New(filepath.Join(t.TempDir(), "sglang.git"))
	if err != nil {
		t.Fatal(err)
	}
	hs := map[string]plumbing.Hash{}
	step := func(name, msg string, files map[string][]byte) {
		t.Helper()
		h, err := b.Commit(msg, files)
		if err != nil {
			t.Fatal(err)
		}
		hs[name] = h
	}
	step("first", "initial import", map[string][]byte{
		"python/sglang/version.py":                 []byte("__version__ = \"0.5.6.post2\"\n"),
		"python/sglang/srt/layers/communicator.py": []byte("import torch\n\n_is_sm90_supported = True\n"),
		"README.md": []byte("# sglang\n"),
	})
	if err := b.Tag("v0.5.6.post2", true); err != nil {
		t.Fatal(err)
	}
	step("second", "docs: more words", map[string][]byte{"README.md": []byte("# sglang\n\nfast serving\n")})
	step("third", "build: version from git tags", map[string][]byte{"python/sglang/version.py": nil})
	if err := b.Tag("v0.5.7rc1", false); err != nil {
		t.Fatal(err)
	}
	step("fourth", "fix: typo", map[string][]byte{"README.md": []byte("# sglang\n\nfast serving.\n")})
	return b, hs
}

func TestCacheResolve(t *testing.T) {
	ctx := context.Background()
	b, hs := upstreamRepo(t)
	c := &RepoCache{Dir: filepath.Join(t.TempDir(), "cache")}
	u, err := c.Open(ctx, b.URL())
	if err != nil {
		t.Fatal(err)
	}
	if !u.Fetched {
		t.Fatal("first open did not fetch")
	}
	if got, want := filepath.Dir(u.Path), c.Dir; got != want {
		t.Fatalf("cache path %s not under %s", u.Path, want)
	}
	short := hs["second"].String()[:9]
	for _, tc := range []struct{ rev, want string }{
		{"v0.5.6.post2", "first"},
		{"v0.5.7rc1", "third"},
		{"main", "fourth"},
		{"origin/main", "fourth"},
		{hs["second"].String(), "second"},
		{short, "second"},
		{"main~1", "third"},
	} {
		h, err := u.Resolve(ctx, tc.rev)
		if err != nil {
			t.Errorf("source.Resolve(%q): %v", tc.rev, err)
			continue
		}
		if h != hs[tc.want] {
			t.Errorf("source.Resolve(%q) = %s, want %s (%s)", tc.rev, h, hs[tc.want], tc.want)
		}
	}
	_, err = u.Resolve(ctx, "v0.5.8")
	if !errors.Is(err, ErrUnknownRevision) || !strings.Contains(err.Error(), `"v0.5.8"`) {
		t.Fatalf("unknown tag: %v", err)
	}
	_, err = u.Resolve(ctx, "v0.5")
	if err == nil || !strings.Contains(err.Error(), "did you mean v0.5.6.post2, v0.5.7rc1") {
		t.Fatalf("unknown tag prefix: %v", err)
	}
}

func TestCacheFetchesOnlyWhenNeeded(t *testing.T) {
	ctx := context.Background()
	b, hs := upstreamRepo(t)
	c := &RepoCache{Dir: t.TempDir()}
	if _, err := c.Open(ctx, b.URL()); err != nil {
		t.Fatal(err)
	}
	newer, err := b.Commit("feat: newer", map[string][]byte{"NEW.md": []byte("new\n")})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Tag("v0.5.7", false); err != nil {
		t.Fatal(err)
	}

	// A tag and a full SHA already cached: no fetch.
	u, err := c.Open(ctx, b.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, rev := range []string{"v0.5.6.post2", hs["second"].String()} {
		if _, err := u.Resolve(ctx, rev); err != nil {
			t.Fatal(err)
		}
	}
	if u.Fetched {
		t.Fatal("resolving a cached tag or SHA fetched")
	}
	// A branch means the remote's branch now: fetch, and see the new tag.
	h, err := u.Resolve(ctx, "main")
	if err != nil || h != newer || !u.Fetched {
		t.Fatalf("source.Resolve(main) = %s, %v, fetched %v; want %s", h, err, u.Fetched, newer)
	}
	if h, err := ResolveRevision(u.Repo, "v0.5.7"); err != nil || h != newer {
		t.Fatalf("new tag: %s %v", h, err)
	}
}

func TestCacheUnreachableRemote(t *testing.T) {
	c := &RepoCache{Dir: t.TempDir()}
	url := "file://" + filepath.Join(t.TempDir(), "missing.git")
	_, err := c.Open(context.Background(), url)
	if err == nil || !strings.Contains(err.Error(), url) {
		t.Fatalf("err = %v, want one naming %s", err, url)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, CacheSlug(url))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed clone left %s behind (%v)", CacheSlug(url), err)
	}
	// Nor its lock file, also when several processes' worth of opens fail
	// at once (each waits for the lock the one before removed).
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := c.Open(context.Background(), url); err == nil {
				t.Error("open of an unreachable remote succeeded")
			}
		})
	}
	wg.Wait()
	if ents, err := os.ReadDir(c.Dir); err != nil || len(ents) != 0 {
		t.Fatalf("a failed clone left %v behind (%v)", ents, err)
	}
}

func TestCacheCorruptRecovers(t *testing.T) {
	ctx := context.Background()
	b, hs := upstreamRepo(t)
	for _, tc := range []struct {
		name    string
		corrupt func(path string) error
	}{
		{"config", func(p string) error {
			return os.WriteFile(filepath.Join(p, "config"), []byte("[core\n\x00garbage"), 0o644)
		}},
		{"objects", func(p string) error {
			if err := os.RemoveAll(filepath.Join(p, "objects")); err != nil {
				return err
			}
			return os.MkdirAll(filepath.Join(p, "objects"), 0o755)
		}},
		{"other remote", func(p string) error {
			cfg, err := os.ReadFile(filepath.Join(p, "config"))
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(p, "config"), bytes.ReplaceAll(cfg, []byte("file://"), []byte("file:///elsewhere")), 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var notes bytes.Buffer
			c := &RepoCache{Dir: t.TempDir(), Notice: &notes}
			u, err := c.Open(ctx, b.URL())
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.corrupt(u.Path); err != nil {
				t.Fatal(err)
			}
			u, err = c.Open(ctx, b.URL())
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			if !strings.Contains(notes.String(), "is corrupt") || !strings.Contains(notes.String(), "fetching "+b.URL()+" again") {
				t.Fatalf("notice = %q", notes.String())
			}
			if h, err := u.Resolve(ctx, "v0.5.6.post2"); err != nil || h != hs["first"] {
				t.Fatalf("after recovery: %s %v", h, err)
			}
		})
	}
}

func TestCheckout(t *testing.T) {
	ctx := context.Background()
	b, hs := upstreamRepo(t)
	c := &RepoCache{Dir: t.TempDir()}
	u, err := c.Open(ctx, b.URL())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "work")
	if err := u.Checkout(ctx, hs["second"], dir, ""); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil || string(data) != "# sglang\n\nfast serving\n" {
		t.Fatalf("README.md = %q, %v", data, err)
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	head, err := repo.Head()
	if err != nil || head.Hash() != hs["second"] {
		t.Fatalf("HEAD = %v, %v", head, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	st, err := wt.Status()
	if err != nil || !st.IsClean() {
		t.Fatalf("status not clean: %v %v", st, err)
	}

	// A tag travels with the checkout (annotated tags with their object).
	tagged := filepath.Join(t.TempDir(), "tagged")
	if err := u.Checkout(ctx, hs["first"], tagged, "v0.5.6.post2"); err != nil {
		t.Fatal(err)
	}
	r2, err := git.PlainOpen(tagged)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := ResolveRevision(r2, "v0.5.6.post2"); err != nil || h != hs["first"] {
		t.Fatalf("tag in checkout: %s %v", h, err)
	}

	// DIR not empty: refused, nothing touched.
	err = u.Checkout(ctx, hs["first"], dir, "")
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("non-empty dir: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "README.md")); string(data) != "# sglang\n\nfast serving\n" {
		t.Fatal("refused checkout changed the directory")
	}
}

// Symbolic links are checked out as the tree records them, an absolute
// target included, like git does.
func TestCheckoutSymlinks(t *testing.T) {
	ctx := context.Background()
	b, err := gitbuild.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b.MarkSymlink("python/sglang/abs")
	b.MarkSymlink("python/sglang/rel")
	h, err := b.Commit("links", map[string][]byte{
		"python/sglang/version.py": []byte("__version__ = \"0.5.9\"\n"),
		"python/sglang/abs":        []byte("/etc/hostname"),
		"python/sglang/rel":        []byte("version.py"),
	})
	if err != nil {
		t.Fatal(err)
	}
	u, err := (&RepoCache{Dir: t.TempDir()}).Open(ctx, b.URL())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "work")
	if err := u.Checkout(ctx, h, dir, ""); err != nil {
		t.Fatal(err)
	}
	for link, want := range map[string]string{"abs": "/etc/hostname", "rel": "version.py"} {
		if got, err := os.Readlink(filepath.Join(dir, "python/sglang", link)); err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %q", link, got, err, want)
		}
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	if st, err := wt.Status(); err != nil || !st.IsClean() {
		t.Fatalf("status not clean: %v %v", st, err)
	}
}

func TestCacheSlug(t *testing.T) {
	for _, tc := range []struct{ url, prefix string }{
		{"https://github.com/sgl-project/sglang", "github.com-sgl-project-sglang-"},
		{"https://github.com/sgl-project/sglang.git", "github.com-sgl-project-sglang-"},
		{"https://user:tok@github.com/a/b", "github.com-a-b-"},
		{"git@github.com:a/b.git", "github.com-a-b-"},
		{"file:///tmp/x y/repo", "tmp-x-y-repo-"},
		{"file:///srv/a@b/repo", "srv-a-b-repo-"},
		{"ssh://git@example.org:2222/team/repo.git", "example.org-2222-team-repo-"},
		{"", "repo-"},
	} {
		got := CacheSlug(tc.url)
		if !strings.HasPrefix(got, tc.prefix) || len(got) != len(tc.prefix)+10 {
			t.Errorf("CacheSlug(%q) = %q, want %q + 10 hex", tc.url, got, tc.prefix)
		}
	}
	if CacheSlug("https://github.com/a/b") == CacheSlug("https://github.com/a/b.git") {
		t.Error("different URLs share a cache directory")
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/x/cache")
	if d, err := DefaultCacheDir(); err != nil || d != "/x/cache/smpatch/repos" {
		t.Fatalf("DefaultCacheDir = %q, %v", d, err)
	}
}

// Without a git binary, file:// URLs are served in process by go-git.
func TestCacheWithoutGitBinary(t *testing.T) {
	client.InstallProtocol("file", server.DefaultServer)
	defer client.InstallProtocol("file", file.DefaultClient)
	ctx := context.Background()
	b, hs := upstreamRepo(t)
	c := &RepoCache{Dir: t.TempDir()}
	u, err := c.Open(ctx, b.URL())
	if err != nil {
		t.Fatal(err)
	}
	if h, err := u.Resolve(ctx, "v0.5.7rc1"); err != nil || h != hs["third"] {
		t.Fatalf("Resolve: %s %v", h, err)
	}
	dir := filepath.Join(t.TempDir(), "w")
	if err := u.Checkout(ctx, hs["third"], dir, "v0.5.7rc1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "python/sglang/version.py")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("version.py was removed at this commit: %v", err)
	}
}

// Two processes' worth of opens on one URL at once: the lock serialises the
// clone, and both see the same commits.
func TestCacheConcurrentOpen(t *testing.T) {
	ctx := context.Background()
	b, hs := upstreamRepo(t)
	dir := t.TempDir()
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() {
			c := &RepoCache{Dir: dir}
			u, err := c.Open(ctx, b.URL())
			if err == nil {
				var h plumbing.Hash
				h, err = u.Resolve(ctx, "main")
				if err == nil && h != hs["fourth"] {
					err = errors.New("main resolved to " + h.String())
				}
			}
			errs <- err
		}()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// A cache whose pack is damaged after it was made: resolving a tag it holds
// says the cache is corrupt, names it and says what to do, and never offers
// the name asked for as a suggestion. The annotated tag object is intact
// (so the cache passes the check at open); the commit it names is not.
func TestCacheCorruptPackNamed(t *testing.T) {
	ctx := context.Background()
	b, hs := upstreamRepo(t)
	c := &RepoCache{Dir: t.TempDir()}
	u, err := c.Open(ctx, b.URL())
	if err != nil {
		t.Fatal(err)
	}
	idxs, _ := filepath.Glob(filepath.Join(u.Path, "objects", "pack", "*.idx"))
	if len(idxs) != 1 {
		t.Fatalf("indexes %v", idxs)
	}
	f, err := os.Open(idxs[0])
	if err != nil {
		t.Fatal(err)
	}
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(f).Decode(idx); err != nil {
		t.Fatal(err)
	}
	f.Close()
	off, err := idx.FindOffset(hs["first"])
	if err != nil {
		t.Fatal(err)
	}
	pack := strings.TrimSuffix(idxs[0], ".idx") + ".pack"
	data, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	for i := off + 4; i < off+40 && i < int64(len(data))-20; i++ {
		data[i] ^= 0x5a
	}
	os.Chmod(pack, 0o644)
	if err := os.WriteFile(pack, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var notes bytes.Buffer
	u2, err := (&RepoCache{Dir: c.Dir, Notice: &notes}).Open(ctx, b.URL())
	if err != nil || notes.Len() > 0 {
		t.Fatalf("open: %v %q (the tag object is intact: the check at open passes)", err, notes.String())
	}
	_, err = u2.Resolve(ctx, "v0.5.6.post2")
	if err == nil {
		t.Fatal("resolved a tag through a damaged pack")
	}
	msg := err.Error()
	if strings.Contains(msg, "did you mean") || strings.Contains(msg, "\n") ||
		!strings.Contains(msg, u.Path) || !strings.Contains(msg, "corrupt") || !strings.Contains(msg, "rm -rf") {
		t.Fatalf("err = %q, want one line naming the cache %s as corrupt and how to fix it", msg, u.Path)
	}
}

func TestRemoteErrorNamesWhatTheRemoteSaid(t *testing.T) {
	sent := fmt.Errorf("unexpected error: %s", "aborting due to possible repository corruption on the remote side.\x00\n")
	got := remoteError("file:///src/sglang", sent).Error()
	want := "remote file:///src/sglang refused the fetch: aborting due to possible repository corruption on the remote side."
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	other := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	if got := remoteError("https://x/y", other).Error(); got != "remote https://x/y unreachable: dial tcp 10.0.0.1:443: connect: connection refused" {
		t.Fatalf("got %q", got)
	}
}

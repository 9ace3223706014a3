package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smpatch/smpatch/internal/testkit/treetest"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/smpatch/smpatch/source"
)

// TestMain reads a checkout's version tag as smpatch does: source's
// TagReader is NearestTag.
func TestMain(m *testing.M) {
	source.SetTagReader(NearestTag)
	os.Exit(m.Run())
}

// testSig signs the test commits and annotated tags.
var testSig = &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}

// gitCheckout is sglangCheckout as a git repository: commit adds python/
// and commits it, returning the commit.
func gitCheckout(t *testing.T) (string, *git.Repository, func(msg string) plumbing.Hash) {
	t.Helper()
	root := treetest.SGLangCheckout(t, "")
	repo, err := git.PlainInit(root, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, _ := repo.Worktree()
	return root, repo, func(msg string) plumbing.Hash {
		t.Helper()
		if _, err := wt.Add("python"); err != nil {
			t.Fatal(err)
		}
		h, err := wt.Commit(msg, &git.CommitOptions{Author: testSig})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
}

func TestVersionFromGitTag(t *testing.T) {
	ctx := context.Background()
	root, repo, commit := gitCheckout(t)
	c1 := commit("one")
	if _, err := repo.CreateTag("v0.5.3rc2", c1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.CreateTag("gateway-v9.0.0", c1, nil); err != nil {
		t.Fatal(err)
	}
	treetest.Write(t, root, map[string]string{"python/sglang/srt/layers/comm.py": "x = 2\n"})
	c2 := commit("two")
	tr, _ := source.OpenCheckout(root)
	v, from, err := tr.Version(ctx)
	if err != nil || v == nil || source.VersionString(v) != "0.5.3rc2" || from != "git tag v0.5.3rc2 (+1 commits)" {
		t.Fatalf("version %v from %q err %v", v, from, err)
	}
	if _, err := repo.CreateTag("v0.5.4", c2, &git.CreateTagOptions{Tagger: testSig, Message: "annotated"}); err != nil {
		t.Fatal(err)
	}
	v, from, _ = tr.Version(ctx)
	if v == nil || source.VersionString(v) != "0.5.4" || from != "git tag v0.5.4" {
		t.Fatalf("annotated: %v %q", v, from)
	}
	// No tags, no literal: unknown with a reason, not an error.
	bare := treetest.SGLangCheckout(t, "")
	tr, _ = source.OpenCheckout(bare)
	v, from, err = tr.Version(ctx)
	if err != nil || v != nil || !strings.HasPrefix(from, "unknown: ") {
		t.Fatalf("unknown: %v %q %v", v, from, err)
	}
}

// A clone made with `git clone --shared` (or --reference) has no objects of
// its own: objects/info/alternates names the object directory it borrows
// from. The version is still read from the tag HEAD sits on.
func TestVersionFromGitTagWithAlternates(t *testing.T) {
	ctx := context.Background()
	src, repo, commit := gitCheckout(t)
	c1 := commit("one")
	if _, err := repo.CreateTag("v0.5.9", c1, &git.CreateTagOptions{Tagger: testSig, Message: "annotated"}); err != nil {
		t.Fatal(err)
	}
	tagRef, _ := repo.Reference("refs/tags/v0.5.9", false)

	// The shared clone: a work tree, refs of its own, no objects.
	clone := treetest.SGLangCheckout(t, "")
	dot := filepath.Join(clone, ".git")
	treetest.Write(t, dot, map[string]string{
		"HEAD":                    c1.String() + "\n",
		"config":                  "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
		"refs/tags/v0.5.9":        tagRef.Hash().String() + "\n",
		"objects/info/alternates": filepath.Join(src, ".git", "objects") + "\n",
	})
	os.MkdirAll(filepath.Join(dot, "objects", "pack"), 0o755)
	os.MkdirAll(filepath.Join(dot, "refs", "heads"), 0o755)

	tr, err := source.OpenCheckout(clone)
	if err != nil {
		t.Fatal(err)
	}
	v, from, err := tr.Version(ctx)
	if err != nil || v == nil || source.VersionString(v) != "0.5.9" || from != "git tag v0.5.9" {
		t.Fatalf("version %v from %q err %v", v, from, err)
	}

	// A relative alternate is named, not silently ignored.
	treetest.Write(t, dot, map[string]string{"objects/info/alternates": "../../elsewhere/objects\n"})
	if _, _, err := OpenGitStorage(clone); err == nil || !strings.Contains(err.Error(), "relative") {
		t.Fatalf("relative alternate: %v", err)
	}
}

// chainCommits adds n commits with parent's tree on top of parent, straight
// into the object store, and returns the last.
func chainCommits(t *testing.T, repo *git.Repository, parent plumbing.Hash, n int) plumbing.Hash {
	t.Helper()
	pc, err := repo.CommitObject(parent)
	if err != nil {
		t.Fatal(err)
	}
	h := parent
	for i := 0; i < n; i++ {
		c := &object.Commit{Author: pc.Author, Committer: pc.Committer, Message: fmt.Sprintf("c%d\n", i), TreeHash: pc.TreeHash, ParentHashes: []plumbing.Hash{h}}
		o := repo.Storer.NewEncodedObject()
		if err := c.Encode(o); err != nil {
			t.Fatal(err)
		}
		if h, err = repo.Storer.SetEncodedObject(o); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// A tag more than source.MaxTagDistance commits behind HEAD does not name the code
// (main of a project that tags release branches): the version is unknown,
// with the tag and the distance given as the reason. Within the threshold
// the distance is reported beside the tag.
func TestVersionTagTooFarBehind(t *testing.T) {
	ctx := context.Background()
	root, repo, commit := gitCheckout(t)
	c1 := commit("one")
	if _, err := repo.CreateTag("v0.5.6.post2", c1, nil); err != nil {
		t.Fatal(err)
	}
	near := chainCommits(t, repo, c1, source.MaxTagDistance)
	far := chainCommits(t, repo, near, 1)
	setHead := func(h plumbing.Hash) {
		if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, h)); err != nil {
			t.Fatal(err)
		}
	}

	setHead(near)
	tr, _ := source.OpenCheckout(root)
	v, from, err := tr.Version(ctx)
	want := fmt.Sprintf("git tag v0.5.6.post2 (+%d commits)", source.MaxTagDistance)
	if err != nil || v == nil || from != want {
		t.Fatalf("at the threshold: %v %q %v, want %q", v, from, err, want)
	}

	setHead(far)
	v, from, err = tr.Version(ctx)
	want = fmt.Sprintf("nearest version tag v0.5.6.post2 is %d commits behind HEAD, more than %d", source.MaxTagDistance+1, source.MaxTagDistance)
	if err != nil || v != nil || !strings.HasPrefix(from, "unknown: ") || !strings.Contains(from, want) {
		t.Fatalf("past the threshold: %v %q %v, want unknown with %q", v, from, err, want)
	}
}

// A linked work tree (git worktree add) has a .git file naming its own git
// directory, which holds HEAD and a commondir file pointing at the main
// repository's refs and objects: the version is the tag nearest the work
// tree's HEAD, read from the shared tags and objects.
func TestVersionFromGitTagLinkedWorktree(t *testing.T) {
	ctx := context.Background()
	main, repo, commit := gitCheckout(t)
	c1 := commit("one")
	if _, err := repo.CreateTag("v0.5.7", c1, &git.CreateTagOptions{Tagger: testSig, Message: "annotated"}); err != nil {
		t.Fatal(err)
	}
	c2 := chainCommits(t, repo, c1, 3)
	if _, err := repo.CreateTag("v0.5.8", c2, nil); err != nil {
		t.Fatal(err)
	}

	// The linked work tree sits at c1 plus one commit, below v0.5.8.
	mid := chainCommits(t, repo, c1, 1)
	linked := treetest.SGLangCheckout(t, "")
	gitdir := filepath.Join(main, ".git", "worktrees", "linked")
	treetest.Write(t, gitdir, map[string]string{
		"HEAD":      mid.String() + "\n",
		"commondir": "../..\n",
		"gitdir":    filepath.Join(linked, ".git") + "\n",
	})
	treetest.Write(t, linked, map[string]string{".git": "gitdir: " + gitdir + "\n"})

	tr, err := source.OpenCheckout(linked)
	if err != nil {
		t.Fatal(err)
	}
	v, from, err := tr.Version(ctx)
	if err != nil || v == nil || source.VersionString(v) != "0.5.7" || from != "git tag v0.5.7 (+1 commits)" {
		t.Fatalf("linked work tree: %v %q %v", v, from, err)
	}

	// A named pipe as the .git file is refused, not waited on.
	os.Remove(filepath.Join(linked, ".git"))
	if err := syscall.Mkfifo(filepath.Join(linked, ".git"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, from, _ = tr.Version(ctx)
	if v != nil || !strings.Contains(from, "not a regular file") {
		t.Fatalf(".git a named pipe: %v %q", v, from)
	}
	os.Remove(filepath.Join(linked, ".git"))

	// A .git file that names no directory is named in the reason.
	treetest.Write(t, linked, map[string]string{".git": "gitdir: " + filepath.Join(main, "nowhere") + "\n"})
	v, from, _ = tr.Version(ctx)
	if v != nil || !strings.Contains(from, "nowhere") {
		t.Fatalf("broken .git file: %v %q", v, from)
	}
}

// A named pipe in place of HEAD, packed-refs or a loose tag is refused in
// one line naming it; go-git would open it and wait for good.
func TestNearestTagRefusesNamedPipes(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"HEAD", "packed-refs", "refs/tags/v9.9.9"} {
		root, repo, commit := gitCheckout(t)
		c := commit("one")
		if _, err := repo.CreateTag("v0.5.7", c, nil); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, ".git", name)
		os.Remove(p)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skip(err)
		}
		done := make(chan error, 1)
		go func() { _, _, err := NearestTag(ctx, root); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), p+": not a regular file") {
				t.Errorf("%s a named pipe: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s a named pipe: NearestTag still waiting after 10 s", name)
		}
	}
}

// A loose object or a pack that is a named pipe is refused before go-git
// opens it, naming it.
func TestNearestTagRefusesNamedPipeObjects(t *testing.T) {
	ctx := context.Background()
	for _, what := range []string{"loose", "pack"} {
		root, repo, commit := gitCheckout(t)
		c := commit("one")
		if _, err := repo.CreateTag("v0.5.7", c, nil); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, ".git", "objects", c.String()[:2], c.String()[2:])
		if what == "pack" {
			if err := repo.RepackObjects(&git.RepackConfig{}); err != nil {
				t.Fatal(err)
			}
			packs, _ := filepath.Glob(filepath.Join(root, ".git", "objects", "pack", "*.pack"))
			if len(packs) != 1 {
				t.Fatalf("packs: %v", packs)
			}
			p = packs[0]
		}
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skip(err)
		}
		done := make(chan error, 1)
		go func() { _, _, err := NearestTag(ctx, root); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), p+": not a regular file (a named pipe)") {
				t.Errorf("%s object a named pipe: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s object a named pipe: NearestTag still waiting after 10 s", what)
		}
	}
}

// A tag whose object cannot be read (a loose object or a pack that is a
// named pipe) is said to be unreadable, naming the file, not reported as an
// unknown revision.
func TestResolveUnreadableTag(t *testing.T) {
	for _, what := range []string{"loose", "pack"} {
		root, repo, commit := gitCheckout(t)
		c := commit("one")
		if _, err := repo.CreateTag("v0.5.7", c, nil); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, ".git", "objects", c.String()[:2], c.String()[2:])
		if what == "pack" {
			if err := repo.RepackObjects(&git.RepackConfig{}); err != nil {
				t.Fatal(err)
			}
			packs, _ := filepath.Glob(filepath.Join(root, ".git", "objects", "pack", "*.pack"))
			p = packs[0]
		}
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skip(err)
		}
		r, err := Open(root)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ResolveRevision(r, "v0.5.7")
		if err == nil || errors.Is(err, ErrUnknownRevision) || !strings.Contains(err.Error(), `tag "v0.5.7": `) ||
			!strings.Contains(err.Error(), p+": not a regular file (a named pipe)") {
			t.Errorf("%s object a named pipe: %v", what, err)
		}
	}
}

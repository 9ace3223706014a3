package author

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

var sig = &object.Signature{Name: "Dev", Email: "dev@example.org", When: time.Unix(1767225600, 0)}

// gitTree commits files (path -> content) into the repository at dir,
// tagging the commit when tag is set.
func gitTree(t *testing.T, dir string, files map[string]string, tag string) plumbing.Hash {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		if repo, err = git.PlainInit(dir, false); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	h, err := wt.Commit("change "+tag, &git.CommitOptions{Author: sig, AllowEmptyCommits: true})
	if err != nil {
		t.Fatal(err)
	}
	if tag != "" {
		if _, err := repo.CreateTag(tag, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// sharedClone makes a repository at dst that borrows every object of src
// through objects/info/alternates (as git clone --shared does) and has its
// refs; src's objects are packed first when pack is set.
func sharedClone(t *testing.T, src, dst string, pack bool) {
	t.Helper()
	srcRepo, err := git.PlainOpen(src)
	if err != nil {
		t.Fatal(err)
	}
	if pack {
		if err := srcRepo.RepackObjects(&git.RepackConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	dstRepo, err := git.PlainInit(dst, false)
	if err != nil {
		t.Fatal(err)
	}
	alt := filepath.Join(dst, ".git", "objects", "info", "alternates")
	if err := os.MkdirAll(filepath.Dir(alt), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alt, []byte(filepath.Join(src, ".git", "objects")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refs, err := srcRepo.References()
	if err != nil {
		t.Fatal(err)
	}
	_ = refs.ForEach(func(r *plumbing.Reference) error {
		return dstRepo.Storer.SetReference(r)
	})
}

const commV14 = "_is_sm90 = is_sm90()\n_is_sm100 = is_sm100()\n\n\ndef allreduce_fusion(n):\n    return (\n        (_is_sm90 or _is_sm100)\n        and n > 0\n    )\n"

func TestImportShortSHAThroughAlternates(t *testing.T) {
	for _, pack := range []bool{false, true} {
		dir := t.TempDir()
		up := filepath.Join(dir, "up")
		gitTree(t, up, map[string]string{"python/sglang/srt/comm.py": commV14, "python/sglang/__init__.py": ""}, "v0.5.14")
		h := gitTree(t, up, map[string]string{"python/sglang/srt/comm.py": strings.Replace(commV14, "_is_sm100)", "_is_sm100 or _is_sm120)", 1)}, "")
		clone := filepath.Join(dir, "clone")
		sharedClone(t, up, clone, pack)
		start := time.Now()
		res, err := Import(context.Background(), ImportOptions{Name: "gate", Into: filepath.Join(dir, "cat"), Git: clone, Commit: h.String()[:10]})
		if err != nil {
			t.Fatalf("pack=%v: %v", pack, err)
		}
		if res.Versions != ">= 0.5.14" || time.Since(start) > 5*time.Second {
			t.Errorf("pack=%v: versions %q after %v", pack, res.Versions, time.Since(start))
		}
		toml, _ := os.ReadFile(res.TOML)
		if !strings.Contains(string(toml), "from tag v0.5.14 (+0 commits)") && !strings.Contains(string(toml), "from tag v0.5.14") {
			t.Errorf("no version comment in\n%s", toml)
		}
		_, err = Import(context.Background(), ImportOptions{Name: "none", Into: filepath.Join(dir, "cat"), Git: clone, Commit: "0000000000ab"})
		if err == nil || !strings.Contains(err.Error(), "no commit starts with 0000000000ab") {
			t.Errorf("pack=%v: no match: %v", pack, err)
		}
	}
}

func TestImportShortSHAAmbiguous(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	empty := &object.Tree{}
	eo := repo.Storer.NewEncodedObject()
	if err := empty.Encode(eo); err != nil {
		t.Fatal(err)
	}
	th, err := repo.Storer.SetEncodedObject(eo)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	prefix := ""
	for i := 0; prefix == "" && i < 5000; i++ {
		c := &object.Commit{Author: *sig, Committer: *sig, Message: "c" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String(), TreeHash: th}
		o := repo.Storer.NewEncodedObject()
		if err := c.Encode(o); err != nil {
			t.Fatal(err)
		}
		h, err := repo.Storer.SetEncodedObject(o)
		if err != nil {
			t.Fatal(err)
		}
		p := h.String()[:4]
		if seen[p] {
			prefix = p
		}
		seen[p] = true
	}
	if prefix == "" {
		t.Fatal("no two commits share 4 hex digits")
	}
	_, err = resolveCommit(context.Background(), repo, dir, prefix)
	if err == nil || !strings.Contains(err.Error(), "names 2 commits: give more digits (") {
		t.Fatalf("ambiguous %s: %v", prefix, err)
	}
}

package source

import (
	"bufio"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// OpenGit opens the git repository holding dir (dir itself, or the nearest
// parent with a .git directory or file; linked work trees included). A
// repository that borrows objects from another through
// objects/info/alternates, as `git clone --shared` and
// `git clone --reference` make, reads those objects too: go-git alone
// resolves an absolute alternate path inside the repository's own
// directory and finds nothing.
func OpenGit(dir string) (*git.Repository, error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	if err != nil {
		return nil, err
	}
	st, ok := repo.Storer.(*filesystem.Storage)
	if !ok {
		return repo, nil
	}
	dot := st.Filesystem()
	alts, err := readAlternates(dot)
	if err != nil || len(alts) == 0 {
		return repo, err
	}
	for _, a := range alts {
		if !filepath.IsAbs(a) {
			return nil, fmt.Errorf("%s: alternate object directory %q is relative; smpatch reads only absolute alternates (git clone --shared and --reference write absolute ones)", dot.Join(dot.Root(), "objects/info/alternates"), a)
		}
	}
	var wt billy.Filesystem
	if w, err := repo.Worktree(); err == nil {
		wt = w.Filesystem
	}
	st2 := filesystem.NewStorageWithOptions(dot, cache.NewObjectLRUDefault(), filesystem.Options{AlternatesFS: osfs.New("/")})
	return git.Open(st2, wt)
}

// readAlternates lists the object directories named in
// objects/info/alternates (none when the file is absent).
func readAlternates(dot billy.Filesystem) ([]string, error) {
	f, err := dot.Open(dot.Join("objects", "info", "alternates"))
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", dot.Join(dot.Root(), "objects/info/alternates"), err)
	}
	return out, nil
}

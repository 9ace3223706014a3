package source

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// ErrNoGitRepository is OpenGitStorage's error when no directory from dir
// up to the root holds a .git directory or file.
var ErrNoGitRepository = errors.New("repository does not exist")

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
//
// It reads the store only: no go-git Repository, so callers that read a
// checkout's history need not link go-git's transports.
func OpenGitStorage(dir string) (*filesystem.Storage, billy.Filesystem, error) {
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
	alts, err := readAlternates(repoFS)
	if err != nil {
		return nil, nil, err
	}
	opts := filesystem.Options{}
	for _, a := range alts {
		if !filepath.IsAbs(a) {
			return nil, nil, fmt.Errorf("%s: alternate object directory %q is relative; smpatch reads only absolute alternates (git clone --shared and --reference write absolute ones)", repoFS.Join(repoFS.Root(), "objects/info/alternates"), a)
		}
	}
	if len(alts) > 0 {
		opts.AlternatesFS = osfs.New("/")
	}
	return filesystem.NewStorageWithOptions(repoFS, cache.NewObjectLRUDefault(), opts), wt, nil
}

// findDotGit walks from dir up to the root for a .git directory or file and
// returns the git directory and the work tree.
func findDotGit(dir string) (dot, wt billy.Filesystem, err error) {
	path, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		path = filepath.Dir(path)
	}
	for {
		fi, err := os.Stat(filepath.Join(path, ".git"))
		if err == nil {
			wt = osfs.New(path)
			if fi.IsDir() {
				return osfs.New(filepath.Join(path, ".git")), wt, nil
			}
			dot, err := dotGitFile(path)
			if err != nil {
				return nil, nil, err
			}
			return dot, wt, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, nil, err
		}
		parent := filepath.Dir(path)
		if parent == path {
			return nil, nil, ErrNoGitRepository
		}
		path = parent
	}
}

// dotGitFile follows the "gitdir: PATH" line of the .git file in dir (a
// linked work tree or a submodule); a relative PATH is relative to dir.
func dotGitFile(dir string) (billy.Filesystem, error) {
	name := filepath.Join(dir, ".git")
	b, err := readSmallFile(name, 64<<10)
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
	b, err := readSmallFile(name, 64<<10)
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

// readSmallFile reads at most max bytes of a small git control file (a
// .git file, commondir), a regular file only: opened without blocking, so
// a named pipe in its place is refused, not waited on.
func readSmallFile(name string, max int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	return io.ReadAll(io.LimitReader(f, max))
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

package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/google/renameio/v2"
	"github.com/hashicorp/go-version"
)

// StateDirName is the directory, in a tree's root, that holds smpatch's journal.
const StateDirName = ".smpatch"

// dirTree is a tree on disk: a checkout, or an installed package whose
// repository paths map to package paths.
type dirTree struct {
	root    string // absolute, symlinks resolved
	kind    Kind
	project Project
	// toDisk maps a repository-relative path to a root-relative one.
	toDisk func(rel string) (string, bool)
	// fromDisk maps a root-relative path back to a repository-relative one.
	fromDisk func(rel string) (string, bool)
}

// OpenCheckout opens dir as a source checkout of sglang or flashinfer. A
// directory that is neither returns an error wrapping ErrUnknownProject.
func OpenCheckout(dir string) (WritableTree, error) {
	root, err := cleanRoot(dir)
	if err != nil {
		return nil, err
	}
	p, ok := DetectCheckout(root)
	if !ok {
		return nil, fmt.Errorf("%s: %w", dir, ErrUnknownProject)
	}
	identity := func(rel string) (string, bool) { return rel, true }
	return &dirTree{root: root, kind: KindCheckout, project: p, toDisk: identity, fromDisk: identity}, nil
}

func cleanRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(root)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s: not a directory", dir)
	}
	return root, nil
}

func (t *dirTree) Root() string     { return t.root }
func (t *dirTree) Kind() Kind       { return t.kind }
func (t *dirTree) Project() Project { return t.project }
func (t *dirTree) StateDir() string { return filepath.Join(t.root, StateDirName) }

// Version reads the project version from the tree: the version.py literal,
// then dist-info METADATA, then the nearest git tag.
func (t *dirTree) Version(ctx context.Context) (*version.Version, string, error) {
	return detectVersion(ctx, t)
}

// CleanRel checks a repository-relative path: slash-separated, relative, no
// "..", not empty. It returns the cleaned path.
func CleanRel(rel string) (string, error) {
	if rel == "" {
		return "", errors.New("empty path")
	}
	if strings.ContainsRune(rel, 0) {
		return "", fmt.Errorf("%q: NUL in path", rel)
	}
	if strings.Contains(rel, `\`) {
		return "", fmt.Errorf("%s: backslash in path", rel)
	}
	if path.IsAbs(rel) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s: absolute path", rel)
	}
	for _, part := range strings.Split(rel, "/") {
		if part == ".." {
			return "", fmt.Errorf("%s: path leaves the tree (..)", rel)
		}
	}
	c := path.Clean(rel)
	if c == "." {
		return "", fmt.Errorf("%q: not a file path", rel)
	}
	return c, nil
}

// abs maps a repository-relative path to an absolute path under the root,
// refusing anything that leaves the root, including through a symlink.
func (t *dirTree) abs(rel string) (string, error) {
	c, err := CleanRel(rel)
	if err != nil {
		return "", err
	}
	d, ok := t.toDisk(c)
	if !ok {
		return "", fmt.Errorf("%s: not part of the installed %s package", rel, t.project)
	}
	p := filepath.Join(t.root, filepath.FromSlash(d))
	if err := confined(t.root, p); err != nil {
		return "", fmt.Errorf("%s: %w", rel, err)
	}
	return p, nil
}

// confined checks that p, with every symlink on its existing prefix
// resolved, stays inside root.
func confined(root, p string) error {
	existing := p
	var rest []string
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		rest = append(rest, filepath.Base(existing))
		existing = parent
	}
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return err
	}
	for i := len(rest) - 1; i >= 0; i-- {
		resolved = filepath.Join(resolved, rest[i])
	}
	if !within(root, resolved) {
		return errors.New("path leads outside the tree through a symlink")
	}
	return nil
}

func within(root, p string) bool {
	if p == root {
		return true
	}
	r := root
	if !strings.HasSuffix(r, string(filepath.Separator)) {
		r += string(filepath.Separator)
	}
	return strings.HasPrefix(p, r)
}

func (t *dirTree) ReadFile(rel string) ([]byte, error) {
	p, err := t.abs(rel)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", rel)
	}
	return os.ReadFile(p)
}

// ListFiles lists regular files under the repository-relative dir, sorted,
// skipping VCS, journal and bytecode directories.
func (t *dirTree) ListFiles(dir string) ([]string, error) {
	if dir == "" || dir == "." {
		if t.kind != KindSitePackages {
			return t.listUnder(t.root)
		}
		var all []string
		for _, r := range ProjectRoots(t.project) {
			fs, err := t.ListFiles(strings.TrimSuffix(r, "/"))
			if err != nil {
				return nil, err
			}
			all = append(all, fs...)
		}
		sort.Strings(all)
		return all, nil
	}
	p, err := t.abs(dir)
	if err != nil {
		return nil, err
	}
	return t.listUnder(p)
}

func (t *dirTree) listUnder(start string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == start {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", StateDirName, "__pycache__", "node_modules":
				if p != start {
					return fs.SkipDir
				}
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		r, err := filepath.Rel(t.root, p)
		if err != nil {
			return err
		}
		repo, ok := t.fromDisk(filepath.ToSlash(r))
		if ok {
			out = append(out, repo)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// WriteFiles writes each file by temp + fsync + rename, keeping an existing
// file's mode. A nil value removes the file. Every path is checked before
// anything is written.
func (t *dirTree) WriteFiles(files map[string][]byte) error {
	type item struct {
		abs  string
		data []byte
	}
	var items []item
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, rel := range keys {
		p, err := t.abs(rel)
		if err != nil {
			return err
		}
		if st, err := os.Lstat(p); err == nil && !st.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file", rel)
		}
		items = append(items, item{p, files[rel]})
	}
	for _, it := range items {
		if it.data == nil {
			if err := os.Remove(it.abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if err := syncDir(filepath.Dir(it.abs)); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(it.abs), 0o755); err != nil {
			return err
		}
		if err := WriteFileAtomic(it.abs, it.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteFileAtomic replaces name with data by temp + fsync + rename in the
// same directory, keeping the mode of an existing file (perm otherwise), and
// syncs the directory so the rename is durable.
//
// When an existing file belongs to another user (smpatch run with sudo on
// a user's tree), the new file gets the same owner where permitted.
func WriteFileAtomic(name string, data []byte, perm os.FileMode) error {
	pf, err := renameio.NewPendingFile(name, renameio.WithTempDir(filepath.Dir(name)),
		renameio.WithPermissions(perm), renameio.WithExistingPermissions())
	if err != nil {
		return err
	}
	defer pf.Cleanup()
	if _, err := pf.Write(data); err != nil {
		return err
	}
	if st, err := os.Lstat(name); err == nil && st.Mode().IsRegular() {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
			_ = pf.Chown(int(sys.Uid), int(sys.Gid))
		}
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(name))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// AbsPath maps a repository-relative path to its absolute path on disk,
// refusing paths that leave the tree (.., absolute, symlinks outside).
func (t *dirTree) AbsPath(rel string) (string, error) { return t.abs(rel) }

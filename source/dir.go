package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/bounded"
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
	// via is the editable install that led to this checkout, if one did.
	via *Editable
}

// Via says how the tree was found when it is not where the command looked:
// the editable install in site-packages that points at this checkout ("" for
// a tree named or found directly).
func (t *dirTree) Via() string {
	if t.via == nil {
		return ""
	}
	return t.via.String()
}

// EditableOf is the editable install that led to the tree t, or nil.
func EditableOf(t Tree) *Editable {
	if d, ok := t.(*dirTree); ok {
		return d.via
	}
	return nil
}

// ViaOf is Via of a tree that has one, else "".
func ViaOf(t Tree) string {
	if v, ok := t.(interface{ Via() string }); ok {
		return v.Via()
	}
	return ""
}

// openEditable opens the checkout an editable install points at.
func openEditable(e *Editable) (WritableTree, error) {
	t, err := OpenCheckout(e.Checkout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e, err)
	}
	t.(*dirTree).via = e
	return t, nil
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
	return newCheckout(root, p), nil
}

// newCheckout is OpenCheckout of a root already resolved (cleanRoot) and
// found to be a checkout of p.
func newCheckout(root string, p Project) WritableTree {
	identity := func(rel string) (string, bool) { return rel, true }
	return &dirTree{root: root, kind: KindCheckout, project: p, toDisk: identity, fromDisk: identity}
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

// OpenRoot opens the tree's root directory for confined access: a name
// given to the os.Root it returns never leads outside the tree, through
// ".." or through a symlink. Each call opens the directory at the tree's
// path anew, so a tree kept by a long-lived caller follows its path. The
// caller closes it.
func (t *dirTree) OpenRoot() (*os.Root, error) { return os.OpenRoot(t.root) }

// DiskPath maps a repository-relative path to the path of its file
// relative to the root on disk (OS separators): the same path in a
// checkout, the package's path in site-packages. A path that is not clean
// (CleanRel) or not part of the tree is an error.
func (t *dirTree) DiskPath(rel string) (string, error) {
	c, err := CleanRel(rel)
	if err != nil {
		return "", err
	}
	d, ok := t.toDisk(c)
	if !ok {
		return "", fmt.Errorf("%s: not part of the installed %s package", rel, t.project)
	}
	return filepath.FromSlash(d), nil
}

// ReadFile reads the repository-relative file rel, refusing a path that
// leaves the tree, through ".." or a symlink. A missing file is an error
// satisfying errors.Is(err, fs.ErrNotExist); one that is not a regular
// file (a named pipe, a device) or larger than MaxFileBytes is refused
// unread.
func (t *dirTree) ReadFile(rel string) ([]byte, error) {
	d, err := t.DiskPath(rel)
	if err != nil {
		return nil, err
	}
	r, err := t.OpenRoot()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return readIn(r, d, rel)
}

// readIn reads the regular file d of r; rel names it in errors.
func readIn(r *os.Root, d, rel string) ([]byte, error) {
	// O_NONBLOCK: opening a named pipe must not wait for a writer.
	f, err := r.OpenFile(d, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, treeError(rel, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", rel)
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %s: not read", rel, bounded.SizeText(MaxFileBytes))
	}
	// Read into a buffer of the size the file has (as os.ReadFile does),
	// still bounded should it grow meanwhile.
	b := make([]byte, 0, st.Size()+512)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > MaxFileBytes {
			return nil, fmt.Errorf("%s: larger than %s: not read", rel, bounded.SizeText(MaxFileBytes))
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// MaxFileBytes is the most a tree file smpatch reads may have: source files
// are far smaller, and a journal copy may have no more.
const MaxFileBytes = 64 << 20

// treeError words an error of os.Root: a path that leads out of the tree
// says so (errors.Is(err, fs.ErrNotExist) stays as it is).
func treeError(rel string, err error) error {
	if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("%s: path leads outside the tree", rel)
	}
	return err
}

// ListFiles lists regular files under the repository-relative dir, sorted,
// skipping VCS, journal and bytecode directories.
func (t *dirTree) ListFiles(dir string) ([]string, error) {
	if dir == "" || dir == "." {
		if t.kind != KindSitePackages {
			return t.listUnder(".")
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
	d, err := t.DiskPath(dir)
	if err != nil {
		return nil, err
	}
	return t.listUnder(d)
}

// listUnder walks the root-relative directory start inside the root: a
// symlinked directory below it is not entered, and start itself only when
// it stays inside the tree.
func (t *dirTree) listUnder(start string) ([]string, error) {
	r, err := t.OpenRoot()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []string
	err = fs.WalkDir(r.FS(), filepath.ToSlash(start), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == filepath.ToSlash(start) {
				return fs.SkipAll
			}
			return treeError(p, err)
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
		if repo, ok := t.fromDisk(p); ok {
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

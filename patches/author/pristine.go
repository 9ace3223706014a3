package author

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
)

// MaxFileSize is the most bytes a file of a change may have, before or
// after (source files are well under a megabyte).
const MaxFileSize = 8 << 20

// InputError is bad input to new, import or refresh: a binary file, a path
// outside the project, a pristine source that cannot be read or checked.
// Nothing was written.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputf(format string, args ...any) error {
	return &InputError{fmt.Sprintf(format, args...)}
}

// Pristine is what a tree's changes are measured against.
type Pristine struct {
	// Desc names it for people ("HEAD, commit 1a2b3c4d5e6f").
	Desc string
	// Base is recorded in the variant: a commit, or the wheel's file name
	// and sha256.
	Base string
	// Clone is the git repository Base is a commit of ("" for a wheel).
	Clone string
	// read reads a repository path of the pristine source (nil, nil:
	// absent).
	read func(rel string) ([]byte, error)
	// files are the project's repository paths the pristine source has.
	files []string
	// ignored reports whether a file only the tree has is not the
	// project's (gitignored, built).
	ignored func(rel string) bool
	// unchanged, when set, says from a hash whether cur is the pristine
	// file's content, without reading the pristine bytes.
	unchanged func(rel string, cur []byte) bool
}

// ReadFile reads rel from the pristine source; nil, nil when it has none.
func (p *Pristine) ReadFile(rel string) ([]byte, error) { return p.read(rel) }

// GitPristine is the commit rev (HEAD when "") of the git repository that
// holds checkout t, read with go-git.
func GitPristine(t source.Tree, rev string) (*Pristine, error) {
	repo, err := gitrepo.Open(t.Root())
	if err != nil {
		return nil, inputf("%s: not a git checkout (%v): give the pristine source another way (--wheel for site-packages)", t.Root(), err)
	}
	prefix, err := repoPrefix(repo, t.Root())
	if err != nil {
		return nil, err
	}
	if rev == "" {
		rev = "HEAD"
	}
	c, err := resolveCommit(context.Background(), repo, t.Root(), rev)
	if err != nil {
		return nil, err
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	pr, err := commitPristine(repo, tree, prefix, t.Project(), fmt.Sprintf("%s, commit %s", rev, c.Hash.String()[:12]), c.Hash.String())
	if err != nil {
		return nil, err
	}
	pr.ignored = gitIgnored(t.Root(), prefix)
	pr.Clone = strings.TrimSuffix(t.Root(), "/"+strings.TrimSuffix(prefix, "/"))
	return pr, nil
}

// commitPristine reads the project's files of a commit's tree; prefix is
// the tree's directory inside the repository ("" at its top).
func commitPristine(repo *git.Repository, tree *object.Tree, prefix string, p source.Project, desc, base string) (*Pristine, error) {
	blobs := map[string]plumbing.Hash{}
	for _, r := range source.ProjectRoots(p) {
		sub, err := tree.Tree(strings.TrimSuffix(prefix+r, "/"))
		if errors.Is(err, object.ErrDirectoryNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		err = sub.Files().ForEach(func(f *object.File) error {
			if f.Mode == filemode.Regular || f.Mode == filemode.Executable || f.Mode == filemode.Deprecated {
				blobs[r+f.Name] = f.Hash
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	pr := &Pristine{Desc: desc, Base: base}
	for rel := range blobs {
		pr.files = append(pr.files, rel)
	}
	sort.Strings(pr.files)
	pr.read = func(rel string) ([]byte, error) {
		h, ok := blobs[rel]
		if !ok {
			return nil, nil
		}
		return readBlob(repo, h, rel)
	}
	pr.unchanged = func(rel string, cur []byte) bool {
		h, ok := blobs[rel]
		return ok && plumbing.ComputeHash(plumbing.BlobObject, cur) == h
	}
	return pr, nil
}

func readBlob(repo *git.Repository, h plumbing.Hash, rel string) ([]byte, error) {
	b, err := repo.BlobObject(h)
	if err != nil {
		return nil, fmt.Errorf("%s: blob %s: %w", rel, h, err)
	}
	if b.Size > MaxFileSize {
		return nil, inputf("%s: %d bytes in git, more than %d: not a source file smpatch patches", rel, b.Size, MaxFileSize)
	}
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := bounded.ReadAll(r, MaxFileSize, rel)
	if data == nil && err == nil {
		data = []byte{}
	}
	return data, err
}

// repoPrefix is the checkout's directory inside the repository's work
// tree, with a trailing slash ("" at the top).
func repoPrefix(repo *git.Repository, root string) (string, error) {
	wt, err := repo.Worktree()
	if err != nil {
		return "", inputf("%s: a bare repository has no checkout: %v", root, err)
	}
	top, err := filepath.EvalSymlinks(wt.Filesystem.Root())
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(top, root)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", inputf("%s: outside its repository's work tree %s", root, top)
	}
	if rel == "." {
		return "", nil
	}
	return filepath.ToSlash(rel) + "/", nil
}

// gitIgnored is the .gitignore matcher of the work tree holding root.
func gitIgnored(root, prefix string) func(rel string) bool {
	top := strings.TrimSuffix(root, strings.TrimSuffix(prefix, "/"))
	ps, err := gitignore.ReadPatterns(osfs.New(top), nil)
	if err != nil {
		ps = nil
	}
	m := gitignore.NewMatcher(ps)
	return func(rel string) bool { return m.Match(strings.Split(prefix+rel, "/"), false) }
}

// Diffed is a tree's change against its pristine source.
type Diffed struct {
	Pristine *Pristine
	Changes  []Change
	// Skipped are files left out, each with why (another patch's files).
	Skipped []string
}

// Originals maps each changed path to its pristine bytes.
func (d *Diffed) Originals() map[string][]byte {
	m := map[string][]byte{}
	for _, c := range d.Changes {
		m[c.Path] = c.Old
	}
	return m
}

// Compare reads t against pr: every file of the project that differs, was
// created (not ignored) or deleted. Files an applied journal entry of
// another patch owns are left out (Skipped). only, when set, keeps the
// paths it names. A binary file is refused.
func Compare(ctx context.Context, t source.WritableTree, pr *Pristine, only map[string]bool) (*Diffed, error) {
	return compare(ctx, t, pr, only, "")
}

// compare is Compare; the files of mine's own entry left by apply --merge
// or --reject are read as the tree's (the edit being finished).
func compare(ctx context.Context, t source.WritableTree, pr *Pristine, only map[string]bool, mine string) (*Diffed, error) {
	owned, err := journalOwned(ctx, t, mine)
	if err != nil {
		return nil, err
	}
	d := &Diffed{Pristine: pr}
	seen := map[string]bool{}
	var disk []string
	for _, r := range source.ProjectRoots(t.Project()) {
		fs, err := t.ListFiles(strings.TrimSuffix(r, "/"))
		if err != nil {
			return nil, err
		}
		disk = append(disk, fs...)
	}
	onDisk := map[string]bool{}
	for _, rel := range disk {
		onDisk[rel] = true
	}
	consider := func(rel string) error {
		if seen[rel] || (only != nil && !only[rel]) {
			return nil
		}
		seen[rel] = true
		if err := ctx.Err(); err != nil {
			return err
		}
		var cur []byte
		if onDisk[rel] {
			if cur, err = readTree(t, rel); err != nil {
				return err
			}
		}
		if pr.unchanged != nil && cur != nil && pr.unchanged(rel, cur) {
			return nil
		}
		old, err := pr.read(rel)
		if err != nil {
			return err
		}
		if old == nil && cur == nil || old != nil && cur != nil && bytes.Equal(old, cur) {
			return nil
		}
		if old == nil && pr.ignored != nil && pr.ignored(rel) {
			return nil
		}
		if by, ok := owned[rel]; ok {
			d.Skipped = append(d.Skipped, fmt.Sprintf("%s (changed by %s, which the journal has applied)", source.ShownPath(t, rel), by))
			return nil
		}
		if isBinary(old) || isBinary(cur) {
			return inputf("%s: a binary file: smpatch patches text files only; nothing was written", source.ShownPath(t, rel))
		}
		d.Changes = append(d.Changes, Change{Path: rel, Old: old, New: cur})
		return nil
	}
	for _, rel := range pr.files {
		if err := consider(rel); err != nil {
			return nil, err
		}
	}
	for _, rel := range disk {
		if err := consider(rel); err != nil {
			return nil, err
		}
	}
	sort.Slice(d.Changes, func(i, j int) bool { return d.Changes[i].Path < d.Changes[j].Path })
	return d, nil
}

// readTree reads a tree file, bounded.
func readTree(t source.Tree, rel string) ([]byte, error) {
	b, err := t.ReadFile(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileSize {
		return nil, inputf("%s: %d bytes, more than %d: not a source file smpatch patches", source.ShownPath(t, rel), len(b), MaxFileSize)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// isBinary is git's test: a NUL byte in the first 8000.
func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}

// journalOwned maps each file of an applied journal entry that still has
// the entry's bytes to the entry's patch.
func journalOwned(ctx context.Context, t source.WritableTree, mine string) (map[string]string, error) {
	out := map[string]string{}
	ok, err := journal.Exists(t)
	if err != nil || !ok {
		return out, err
	}
	j, err := journal.Read(ctx, t, journal.Options{})
	if err != nil {
		return nil, err
	}
	defer j.Close()
	for _, e := range j.State().Patches {
		if e.Name == mine && IsFinishEntry(e) {
			continue
		}
		for _, f := range e.Files {
			out[f.Path] = e.Name
		}
	}
	return out, nil
}

package gitbuild

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Builder appends commits to one branch of a bare repository.
type Builder struct {
	Dir    string
	Repo   *git.Repository
	Branch string    // "main"
	When   time.Time // date of the next commit; each commit adds an hour

	files map[string]plumbing.Hash
	head  plumbing.Hash
	links map[string]bool // paths that are symbolic links
}

// New creates a bare repository in dir with HEAD on branch main.
func New(dir string) (*Builder, error) {
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		return nil, err
	}
	b := &Builder{
		Dir: dir, Repo: repo, Branch: "main",
		When:  time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC),
		files: map[string]plumbing.Hash{},
	}
	head := plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName(b.Branch))
	if err := repo.Storer.SetReference(head); err != nil {
		return nil, err
	}
	return b, nil
}

// URL is the file:// URL of the repository.
func (b *Builder) URL() string { return "file://" + b.Dir }

// Head is the last commit made.
func (b *Builder) Head() plumbing.Hash { return b.head }

// Commit records changes (path → contents; a nil value deletes the path) on
// top of the previous commit and moves the branch to it.
func (b *Builder) Commit(msg string, changes map[string][]byte) (plumbing.Hash, error) {
	for p, data := range changes {
		if data == nil {
			delete(b.files, p)
			continue
		}
		h, err := b.writeBlob(data)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		b.files[p] = h
	}
	root, err := b.writeTree("")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	sig := object.Signature{Name: "Upstream Dev", Email: "dev@example.org", When: b.When}
	b.When = b.When.Add(time.Hour)
	c := &object.Commit{Author: sig, Committer: sig, Message: msg + "\n", TreeHash: root}
	if !b.head.IsZero() {
		c.ParentHashes = []plumbing.Hash{b.head}
	}
	obj := b.Repo.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := b.Repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	b.head = h
	ref := plumbing.NewHashReference(plumbing.NewBranchReferenceName(b.Branch), h)
	return h, b.Repo.Storer.SetReference(ref)
}

// Tag tags the last commit; annotated tags get a tag object.
func (b *Builder) Tag(name string, annotated bool) error {
	target := b.head
	if annotated {
		t := &object.Tag{
			Name: name, Target: b.head, TargetType: plumbing.CommitObject,
			Tagger:  object.Signature{Name: "Release", Email: "release@example.org", When: b.When},
			Message: "release " + name + "\n",
		}
		obj := b.Repo.Storer.NewEncodedObject()
		if err := t.Encode(obj); err != nil {
			return err
		}
		h, err := b.Repo.Storer.SetEncodedObject(obj)
		if err != nil {
			return err
		}
		target = h
	}
	return b.Repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewTagReferenceName(name), target))
}

// MarkSymlink makes path a symbolic link from the next commit on: its
// contents are the link's target.
func (b *Builder) MarkSymlink(p string) {
	if b.links == nil {
		b.links = map[string]bool{}
	}
	b.links[p] = true
}

// Put records path as the blob h, already in the object store, from the
// next commit on (for blobs written outside the builder).
func (b *Builder) Put(p string, h plumbing.Hash) { b.files[p] = h }

// SetBranch points another branch at the last commit.
func (b *Builder) SetBranch(name string) error {
	return b.Repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName(name), b.head))
}

func (b *Builder) writeBlob(data []byte) (plumbing.Hash, error) {
	obj := b.Repo.Storer.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(data)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return b.Repo.Storer.SetEncodedObject(obj)
}

// writeTree writes the tree of directory dir ("" for the root).
func (b *Builder) writeTree(dir string) (plumbing.Hash, error) {
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	files := map[string]plumbing.Hash{}
	dirs := map[string]bool{}
	for p, h := range b.files {
		if !strings.HasPrefix(p, prefix) {
			continue
		}
		rest := p[len(prefix):]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			dirs[rest[:i]] = true
		} else {
			files[rest] = h
		}
	}
	t := &object.Tree{}
	for name, h := range files {
		mode := filemode.Regular
		if b.links[prefix+name] {
			mode = filemode.Symlink
		}
		t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: mode, Hash: h})
	}
	for name := range dirs {
		h, err := b.writeTree(path.Join(dir, name))
		if err != nil {
			return plumbing.ZeroHash, err
		}
		t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	// git orders entries by name, directories compared as "name/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(t.Entries, func(i, j int) bool { return key(t.Entries[i]) < key(t.Entries[j]) })
	obj := b.Repo.Storer.NewEncodedObject()
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("tree %s: %w", dir, err)
	}
	return b.Repo.Storer.SetEncodedObject(obj)
}

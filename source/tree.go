package source

import (
	"context"
	"errors"
	"os"

	"github.com/hashicorp/go-version"
)

// Kind says what a Tree is backed by.
type Kind string

const (
	KindCheckout     Kind = "checkout"
	KindSitePackages Kind = "site-packages"
	KindRevision     Kind = "revision"
	KindImage        Kind = "image"
)

// Project is an upstream project smpatch knows.
type Project string

const (
	SGLang     Project = "sglang"
	FlashInfer Project = "flashinfer"
)

// Tree is a read-only view of one project's files.
type Tree interface {
	// Root names the tree for people: a directory, a site-packages dir,
	// "URL@SHA" or "image@digest".
	Root() string
	Kind() Kind
	Project() Project
	// Version is the project version read from the tree itself, with where it
	// was read from ("python/sglang/version.py:1", "dist-info METADATA", "tag v0.5.6").
	// An unknown version is (nil, reason, nil).
	Version(ctx context.Context) (v *version.Version, from string, err error)
	// ReadFile reads a repository-relative path. A missing file is an error
	// satisfying errors.Is(err, fs.ErrNotExist).
	ReadFile(rel string) ([]byte, error)
	// ListFiles lists the repository-relative paths of regular files under the
	// repository-relative directory dir ("" for all), sorted. Patches use it to
	// find a target that moved, by anchor.
	ListFiles(dir string) ([]string, error)
}

// WritableTree is a tree smpatch can change on disk.
type WritableTree interface {
	Tree
	// StateDir is the directory that holds smpatch's journal for this tree.
	StateDir() string
	// OpenRoot opens the tree's root for confined access (os.Root): no
	// name given to it leads outside the tree. The caller closes it.
	OpenRoot() (*os.Root, error)
	// DiskPath maps a repository-relative path to the file's path
	// relative to the root on disk, refusing one that is not the tree's.
	DiskPath(rel string) (string, error)
	// CheckPath refuses a path outside the tree, or one that names (also
	// through a symlink) a place inside .git or the journal directory.
	CheckPath(rel string) error
	// CheckWrites refuses a set of paths that could not all be written
	// (outside the tree, inside .git or the journal directory, not a
	// regular file, read-only), before anything is written.
	CheckWrites(rels []string) error
	// PrepareWrites checks the paths and writes each new content beside
	// its target, changing no file yet (PendingWrites).
	PrepareWrites(rels []string, files map[string][]byte) (*PendingWrites, error)
	// WriteFiles replaces the given repository-relative files (nil
	// removes one), each by temp + fsync + rename.
	WriteFiles(files map[string][]byte) error
}

// ErrUnknownProject is returned when a directory holds neither project.
var ErrUnknownProject = errors.New("not a checkout of sglang or flashinfer")

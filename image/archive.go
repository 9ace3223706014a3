package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ArchivePrefix starts a docker-save tarball destination:
// docker-archive:FILE[:REPO[:TAG]].
const ArchivePrefix = "docker-archive:"

// DefaultArchiveRepo names the images of an archive given without a REPO.
const DefaultArchiveRepo = "smpatch"

// Archive writes images into one docker-save tarball (what `docker load`
// reads; Docker rejects OCI archives), each tagged REPO:NAME. The file holds
// every image put so far and is replaced atomically; layers shared by the
// images (a base) are stored once. In a batch (Begin ... Flush) the file is
// written once, at Flush.
type Archive struct {
	Path string
	// Repo names the images' repository as written (smpatch/story).
	Repo string

	mu     sync.Mutex
	batch  bool
	images map[name.Reference]v1.Image
}

func (a *Archive) String() string { return ArchivePrefix + a.Path }

// Has implements Destination: an archive is always written anew.
func (a *Archive) Has(context.Context, string, v1.Hash) (string, bool, error) {
	return "", false, nil
}

// Put implements Destination. The reference it returns is the tag that
// `docker load` gives the image (REPO:NAME).
func (a *Archive) Put(_ context.Context, nm string, img v1.Image) (string, error) {
	t, err := name.NewTag(a.Repo + ":" + nm)
	if err != nil {
		return "", fmt.Errorf("%q is not a valid tag: %w", nm, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.images == nil {
		a.images = map[name.Reference]v1.Image{}
	}
	a.images[t] = img
	if !a.batch {
		if err := a.write(); err != nil {
			return "", err
		}
	}
	return a.Repo + ":" + nm, nil
}

// Begin starts a batch: Put only collects until Flush.
func (a *Archive) Begin() {
	a.mu.Lock()
	a.batch = true
	a.mu.Unlock()
}

// Flush writes the archive and ends the batch.
func (a *Archive) Flush() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batch = false
	if len(a.images) == 0 {
		return nil
	}
	return a.write()
}

func (a *Archive) write() error {
	dir := filepath.Dir(a.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", a.Path, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(a.Path)+".*")
	if err != nil {
		return fmt.Errorf("%s: %w", a.Path, err)
	}
	tmp := f.Name()
	err = tarball.MultiRefWrite(a.images, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, a.Path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", a.Path, err)
	}
	return nil
}

// parseArchive parses what follows "docker-archive:": FILE[:REPO[:TAG]].
// It returns the archive and the tag given ("" if none).
func parseArchive(s string) (*Archive, string, error) {
	rest := strings.TrimPrefix(s, ArchivePrefix)
	file, ref, _ := strings.Cut(rest, ":")
	if file == "" {
		return nil, "", fmt.Errorf("%s: name a file: docker-archive:FILE[:REPO[:TAG]]", s)
	}
	if ref == "" {
		ref = DefaultArchiveRepo
	}
	tag := ""
	repo := ref
	// A colon after the last slash separates the tag (a registry's
	// host:port has a slash after it).
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo, tag = ref[:i], ref[i+1:]
	}
	if _, err := name.NewRepository(repo); err != nil {
		return nil, "", fmt.Errorf("%s: %q is not a repository name: %w", s, repo, err)
	}
	if tag != "" {
		if _, err := name.NewTag(repo + ":" + tag); err != nil {
			return nil, "", fmt.Errorf("%s: %q is not a tag: %w", s, tag, err)
		}
	}
	return &Archive{Path: file, Repo: repo}, tag, nil
}

package image

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Destination is where built images go: an OCI layout or a registry
// repository. Images are named there by a name (a cell id, or a tag).
type Destination interface {
	// Has reports whether the image with digest d is already there under
	// name, and its reference if so.
	Has(ctx context.Context, name string, d v1.Hash) (ref string, ok bool, err error)
	// Put writes img under name and returns its reference by digest
	// ("repo@sha256:..." or "oci:DIR@sha256:...").
	Put(ctx context.Context, name string, img v1.Image) (ref string, err error)
	String() string
}

// Layout writes images into an OCI layout directory, each annotated with
// org.opencontainers.image.ref.name = its name; an image of the same name
// is replaced. Base layers found in LinkFrom (the base's own layout) are
// hard-linked instead of copied when the filesystem allows.
type Layout struct {
	Dir      string
	LinkFrom string
}

func (l *Layout) String() string { return "oci:" + l.Dir }

func (l *Layout) path() (layout.Path, error) {
	p, err := layout.FromPath(l.Dir)
	if err == nil {
		return p, nil
	}
	if _, serr := os.Stat(filepath.Join(l.Dir, "index.json")); serr == nil {
		return "", fmt.Errorf("%s: %w", l.Dir, err)
	}
	p, err = layout.Write(l.Dir, empty.Index)
	if err != nil {
		return "", fmt.Errorf("%s: creating OCI layout: %w", l.Dir, err)
	}
	return p, nil
}

func (l *Layout) ref(d v1.Hash) string { return "oci:" + absDir(l.Dir) + "@" + d.String() }

// Has implements Destination.
func (l *Layout) Has(_ context.Context, nm string, d v1.Hash) (string, bool, error) {
	p, err := layout.FromPath(l.Dir)
	if err != nil {
		return "", false, nil // no layout yet
	}
	ii, err := p.ImageIndex()
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", l.Dir, err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", l.Dir, err)
	}
	for _, desc := range im.Manifests {
		if desc.Digest == d && desc.Annotations[RefNameAnnotation] == nm {
			if _, err := os.Stat(filepath.Join(l.Dir, "blobs", d.Algorithm, d.Hex)); err == nil {
				return l.ref(d), true, nil
			}
		}
	}
	return "", false, nil
}

// Put implements Destination.
func (l *Layout) Put(_ context.Context, nm string, img v1.Image) (string, error) {
	p, err := l.path()
	if err != nil {
		return "", err
	}
	if l.LinkFrom != "" && absDir(l.LinkFrom) != absDir(l.Dir) {
		if err := linkBlobs(img, l.LinkFrom, l.Dir); err != nil {
			return "", err
		}
	}
	err = p.ReplaceImage(img, match.Annotation(RefNameAnnotation, nm),
		layout.WithAnnotations(map[string]string{RefNameAnnotation: nm}))
	if err != nil {
		return "", fmt.Errorf("%s: writing %s: %w", l.Dir, nm, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return l.ref(d), nil
}

// linkBlobs hard-links the layer blobs img shares with the layout src into
// dst, so a multi-GB base is neither copied nor re-read. Layers that cannot
// be linked are left for the layout writer to copy.
func linkBlobs(img v1.Image, src, dst string) error {
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	for _, desc := range m.Layers {
		from := filepath.Join(src, "blobs", desc.Digest.Algorithm, desc.Digest.Hex)
		to := filepath.Join(dst, "blobs", desc.Digest.Algorithm, desc.Digest.Hex)
		if _, err := os.Stat(to); err == nil {
			continue
		}
		if st, err := os.Stat(from); err != nil || st.Size() != desc.Size {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return fmt.Errorf("%s: %w", dst, err)
		}
		_ = os.Link(from, to) // cross-device: the writer copies instead
	}
	return nil
}

// Registry pushes images to a repository, tagged with their names.
type Registry struct {
	Repo   name.Repository
	Remote Remote
}

func (r *Registry) String() string { return r.Repo.String() }

func (r *Registry) tag(nm string) (name.Tag, error) {
	t, err := name.NewTag(r.Repo.String() + ":" + nm)
	if err != nil {
		return name.Tag{}, fmt.Errorf("%q is not a valid tag: %w", nm, err)
	}
	return t, nil
}

// Has implements Destination: the tag exists and names digest d.
func (r *Registry) Has(ctx context.Context, nm string, d v1.Hash) (string, bool, error) {
	t, err := r.tag(nm)
	if err != nil {
		return "", false, err
	}
	desc, err := remote.Head(t, r.Remote.options(ctx)...)
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
			return "", false, nil
		}
		if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
			return "", false, fmt.Errorf("%s: unauthorized (%d): log in to %s (docker login; credentials come from the default keychain)", t, te.StatusCode, r.Repo.RegistryStr())
		}
		return "", false, fmt.Errorf("%s: %w", t, err)
	}
	if desc.Digest != d {
		return "", false, nil
	}
	return r.Repo.Name() + "@" + d.String(), true, nil
}

// Put implements Destination.
func (r *Registry) Put(ctx context.Context, nm string, img v1.Image) (string, error) {
	t, err := r.tag(nm)
	if err != nil {
		return "", err
	}
	if err := remote.Write(t, img, r.Remote.options(ctx)...); err != nil {
		return "", fmt.Errorf("pushing %s: %w", t, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return r.Repo.Name() + "@" + d.String(), nil
}

// ParseDestination parses --tag/--out/--push style destinations:
// "oci:DIR[:NAME]" (a layout), "docker-archive:FILE[:REPO[:TAG]]" (a
// docker-save tarball) or a registry reference "REPO[:TAG]". It
// returns the destination and the name given in the reference ("" if none).
func ParseDestination(s string, rem Remote) (Destination, string, error) {
	if s == "" {
		return nil, "", errors.New("empty destination")
	}
	if strings.HasPrefix(s, ArchivePrefix) {
		return parseArchive(s)
	}
	if strings.HasPrefix(s, "oci:") {
		r, err := ParseRef(s)
		if err != nil {
			return nil, "", err
		}
		if r.Digest != "" {
			return nil, "", fmt.Errorf("%s: a destination names a tag, not a digest", s)
		}
		return &Layout{Dir: r.Dir}, r.RefName, nil
	}
	ref, err := name.ParseReference(s)
	if err != nil {
		return nil, "", fmt.Errorf("%s: not an image reference: %w", s, err)
	}
	switch ref := ref.(type) {
	case name.Tag:
		// name.ParseReference defaults the tag to "latest"; keep what was written.
		tag := ""
		if t, err := name.NewTag(s, name.StrictValidation); err == nil {
			tag = t.TagStr()
		}
		return &Registry{Repo: ref.Context(), Remote: rem}, tag, nil
	default:
		return nil, "", fmt.Errorf("%s: a destination names a tag, not a digest", s)
	}
}

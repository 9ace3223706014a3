package image

import (
	"context"
	"encoding/json"
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
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/renameio/v2"
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
//
// Only a layout smpatch wrote is ever changed: a new layout gets a marker
// file (LayoutMarker, a format and its version), and an existing
// directory without it is refused. A Put that fails removes what it added
// (blobs, or the whole directory it created); index.json is replaced
// atomically, last.
type Layout struct {
	Dir      string
	LinkFrom string
}

// LayoutMarker marks an OCI layout smpatch wrote; layoutMarkerText is its
// content.
const (
	LayoutMarker     = ".smpatch-layout"
	layoutMarkerText = "{\"format\": \"smpatch-oci-layout\", \"version\": 1}\n"
)

// ErrNotOurs is wrapped by the error for a destination directory smpatch
// did not write.
var ErrNotOurs = errors.New("not written by smpatch")

func (l *Layout) String() string { return "oci:" + l.Dir }

// checkOurs returns nil when dir is missing, empty, or a layout holding
// smpatch's marker in a format this version writes.
func checkOurs(dir string) (exists bool, err error) {
	fi, err := os.Lstat(dir)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return true, fmt.Errorf("%s: a symbolic link; name the layout directory itself", dir)
	}
	if !fi.IsDir() {
		return true, fmt.Errorf("%s exists and is not a directory", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true, err
	}
	if len(ents) == 0 {
		return true, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, LayoutMarker))
	if err != nil {
		return true, fmt.Errorf("%s is not empty and was %w (no %s marker): smpatch only writes into layouts it made; choose another directory", dir, ErrNotOurs, LayoutMarker)
	}
	var mk struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if json.Unmarshal(b, &mk) != nil || mk.Format != "smpatch-oci-layout" || mk.Version < 1 {
		return true, fmt.Errorf("%s: %s is not smpatch's layout marker; %w: choose another directory", dir, LayoutMarker, ErrNotOurs)
	}
	if mk.Version > 1 {
		return true, fmt.Errorf("%s: written by a newer smpatch (layout format %d); choose another directory", dir, mk.Version)
	}
	return true, nil
}

func (l *Layout) ref(d v1.Hash) string { return "oci:" + absDir(l.Dir) + "@" + d.String() }

// Has implements Destination.
func (l *Layout) Has(_ context.Context, nm string, d v1.Hash) (string, bool, error) {
	if _, err := os.Stat(filepath.Join(l.Dir, LayoutMarker)); err != nil {
		return "", false, nil // no layout of ours yet
	}
	p, err := layout.FromPath(l.Dir)
	if err != nil {
		return "", false, nil
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
func (l *Layout) Put(_ context.Context, nm string, img v1.Image) (ref string, err error) {
	exists, err := checkOurs(l.Dir)
	if err != nil {
		return "", err
	}
	created := !exists
	var added []string // blob files this Put creates, removed if it fails
	defer func() {
		if err == nil {
			return
		}
		if created {
			os.RemoveAll(l.Dir)
			return
		}
		for _, f := range added {
			os.Remove(f)
		}
	}()
	if _, serr := os.Stat(filepath.Join(l.Dir, LayoutMarker)); serr != nil {
		if err := os.MkdirAll(l.Dir, 0o755); err != nil {
			return "", fmt.Errorf("%s: creating OCI layout: %w", l.Dir, err)
		}
		if err := os.WriteFile(filepath.Join(l.Dir, LayoutMarker), []byte(layoutMarkerText), 0o644); err != nil {
			return "", fmt.Errorf("%s: %w", l.Dir, err)
		}
		if _, err := layout.Write(l.Dir, empty.Index); err != nil {
			return "", fmt.Errorf("%s: creating OCI layout: %w", l.Dir, err)
		}
	}
	p, err := layout.FromPath(l.Dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", l.Dir, err)
	}
	blobs, err := imageBlobs(img)
	if err != nil {
		return "", err
	}
	for _, h := range blobs {
		f := filepath.Join(l.Dir, "blobs", h.Algorithm, h.Hex)
		if _, err := os.Lstat(f); os.IsNotExist(err) {
			added = append(added, f)
		}
	}
	if l.LinkFrom != "" && absDir(l.LinkFrom) != absDir(l.Dir) {
		if err := linkBlobs(img, l.LinkFrom, l.Dir); err != nil {
			return "", err
		}
	}
	if err := p.WriteImage(verifyingImage{img}); err != nil {
		return "", fmt.Errorf("%s: writing %s: %w", l.Dir, nm, err)
	}
	if err := writeIndex(p, img, nm); err != nil {
		return "", fmt.Errorf("%s: writing %s: %w", l.Dir, nm, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return l.ref(d), nil
}

// imageBlobs lists the blobs an image puts in a layout.
func imageBlobs(img v1.Image) ([]v1.Hash, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	out := []v1.Hash{d, m.Config.Digest}
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out, nil
}

// writeIndex replaces the image named nm in the layout's index.json with
// img, writing the file atomically.
func writeIndex(p layout.Path, img v1.Image, nm string) error {
	ii, err := p.ImageIndex()
	if err != nil {
		return err
	}
	desc, err := partial.Descriptor(img)
	if err != nil {
		return err
	}
	desc.Annotations = map[string]string{RefNameAnnotation: nm}
	ii = mutate.AppendManifests(mutate.RemoveManifests(ii, match.Annotation(RefNameAnnotation, nm)),
		mutate.IndexAddendum{Add: img, Descriptor: *desc})
	im, err := ii.IndexManifest()
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(im, "", "   ")
	if err != nil {
		return err
	}
	return renameio.WriteFile(filepath.Join(string(p), "index.json"), b, 0o644)
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

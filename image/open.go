package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/smpatch/smpatch/internal/bounded"
)

// Bounds on what an image may claim, checked before anything it names is
// read: a manifest or index, a config, and the number of layers (Docker
// refuses images of more than 125).
const (
	MaxManifestBytes = 4 << 20
	MaxConfigBytes   = 16 << 20
	MaxLayers        = 256
)

// ErrTooLarge is wrapped by the errors for an image that claims more than
// the bounds above.
var ErrTooLarge = errors.New("more than smpatch reads")

func checkSize(what string, size, max int64) error {
	if size > max {
		return fmt.Errorf("%s: %d bytes, %w (at most %s)", what, size, ErrTooLarge, bounded.SizeText(int(max)))
	}
	return nil
}

// Resolved is the image a reference names, on a platform.
type Resolved struct {
	Image v1.Image
	// Platform is the image's: the one picked from an index, else what
	// its config says ("" when it says nothing).
	Platform string
	// Index: the reference names a multi-platform index. Defaulted: and
	// no platform was asked for, so DefaultPlatform was picked.
	Index, Defaulted bool
}

// Open fetches the image a reference names. Nothing is downloaded beyond
// the manifest and config: layers stream when they are read.
func Open(ctx context.Context, r *Ref, rem Remote) (v1.Image, error) {
	res, err := Resolve(ctx, r, rem)
	if err != nil {
		return nil, err
	}
	return res.Image, nil
}

// Resolve is Open saying which platform it picked. An index resolves to
// rem.Platform (DefaultPlatform when nil); a single image named with an
// explicit platform must be of that platform.
func Resolve(ctx context.Context, r *Ref, rem Remote) (*Resolved, error) {
	var res *Resolved
	var err error
	switch r.Kind {
	case "layout":
		res, err = openLayout(r, rem)
	case "tarball":
		res, err = openTarball(r)
	case "registry":
		res, err = openRemote(ctx, r, rem)
	default:
		return nil, fmt.Errorf("%s: unknown reference kind %q", r.Raw, r.Kind)
	}
	if err != nil {
		return nil, err
	}
	if err := checkImage(res.Image); err != nil {
		return nil, fmt.Errorf("%s: %w", r.Raw, err)
	}
	if err := res.checkPlatform(rem); err != nil {
		return nil, fmt.Errorf("%s: %w", r.Raw, err)
	}
	return res, nil
}

// checkImage refuses an image whose manifest claims too many layers or a
// config larger than MaxConfigBytes, before the config is read.
func checkImage(img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("reading manifest: %w", err)
	}
	if len(m.Layers) > MaxLayers {
		return fmt.Errorf("the manifest lists %d layers, %w (at most %d)", len(m.Layers), ErrTooLarge, MaxLayers)
	}
	return checkSize("config "+m.Config.Digest.String(), m.Config.Size, MaxConfigBytes)
}

// checkPlatform fills in a single image's platform from its config, and
// refuses one that is not of the platform asked for.
func (res *Resolved) checkPlatform(rem Remote) error {
	if res.Index {
		return nil
	}
	cf, err := res.Image.ConfigFile()
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	have := cf.Platform()
	if have == nil || have.OS == "" {
		return nil // a config that names no platform is taken as it is
	}
	res.Platform = have.String()
	if rem.Platform != nil && !have.Satisfies(*rem.Platform) {
		return fmt.Errorf("the image is %s, not %s (--platform)", have, rem.Platform)
	}
	return nil
}

func openRemote(ctx context.Context, r *Ref, rem Remote) (*Resolved, error) {
	desc, err := remote.Get(r.Name, rem.options(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w%s", r.Raw, err, offlineHint(err))
	}
	if err := checkSize("manifest "+desc.Digest.String(), desc.Size, MaxManifestBytes); err != nil {
		return nil, fmt.Errorf("%s: %w", r.Raw, err)
	}
	res := &Resolved{Index: desc.MediaType.IsIndex()}
	if res.Index {
		ii, err := desc.ImageIndex()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
		im, err := ii.IndexManifest()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
		child, err := pickPlatform(im.Manifests, rem)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
		res.Platform, res.Defaulted = rem.platform().String(), rem.Platform == nil
		if err := checkSize("manifest "+child.Digest.String(), child.Size, MaxManifestBytes); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
	}
	// The registry's index resolves through remote.WithPlatform (in
	// rem.options), as pickPlatform checked it can.
	if res.Image, err = desc.Image(); err != nil {
		return nil, fmt.Errorf("%s: %w", r.Raw, err)
	}
	return res, nil
}

// offlineHint suggests a base that needs no registry when the registry
// could not be reached at all (no route, no name, refused, timed out).
func offlineHint(err error) string {
	var nerr net.Error
	var oerr *net.OpError
	var derr *net.DNSError
	if errors.As(err, &derr) || errors.As(err, &oerr) || errors.As(err, &nerr) {
		return " (registry unreachable; a base that needs none: oci:DIR, an OCI layout, or a docker-save tarball FILE.tar; make demo-image writes one)"
	}
	return ""
}

// pickPlatform is the descriptor of descs (an index's manifests) for
// rem's platform, matched as go-containerregistry's remote.WithPlatform
// matches it: a descriptor that names no platform is linux/amd64.
func pickPlatform(descs []v1.Descriptor, rem Remote) (*v1.Descriptor, error) {
	want := rem.platform()
	var have []string
	for i, d := range descs {
		p := DefaultPlatform
		if d.Platform != nil {
			p = *d.Platform
		}
		if p.OS == "unknown" {
			continue // an attestation manifest of buildx
		}
		if p.Satisfies(want) {
			return &descs[i], nil
		}
		have = append(have, p.String())
	}
	return nil, fmt.Errorf("no %s image in the index (it has %s)", want, strings.Join(have, ", "))
}

// openLayout finds the image an oci: reference names in its layout:
// index.json's only entry, the one of a ref.name or digest, or, when
// index.json or the entry is a multi-platform index, the platform's.
// Every manifest and index read is checked against its descriptor.
func openLayout(r *Ref, rem Remote) (*Resolved, error) {
	fi, err := os.Stat(filepath.Join(r.Dir, "index.json"))
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI layout: %w", r.Dir, err)
	}
	if err := checkSize("index.json", fi.Size(), MaxManifestBytes); err != nil {
		return nil, fmt.Errorf("%s: %w", r.Dir, err)
	}
	p, err := layout.FromPath(r.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI layout: %w", r.Dir, err)
	}
	ii, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("%s: reading index.json: %w", r.Dir, err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: reading index.json: %w", r.Dir, err)
	}
	picks := selectManifests(r, im.Manifests)
	res := &Resolved{}
	var d *v1.Descriptor
	switch {
	case len(picks) == 0 && (r.Digest != "" || r.RefName != ""):
		return nil, fmt.Errorf("%s: no image %s%s in the layout", r.Dir, r.RefName, r.Digest)
	case len(picks) == 0:
		return nil, fmt.Errorf("%s: the layout holds no image", r.Dir)
	case len(picks) > 1 && allPlatforms(picks):
		// index.json is itself a multi-platform index (crane pull --format oci).
		if d, err = res.pick(picks, rem); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
	case len(picks) > 1:
		var names []string
		for _, d := range picks {
			if n := d.Annotations[RefNameAnnotation]; n != "" {
				names = append(names, n)
			}
		}
		return nil, fmt.Errorf("%s: the layout holds %d images; name one as oci:%s:NAME (%s)", r.Dir, len(picks), r.Dir, strings.Join(names, ", "))
	default:
		d = &picks[0]
	}
	for depth := 0; d.MediaType.IsIndex(); depth++ {
		if depth == 2 {
			return nil, fmt.Errorf("%s: indexes nested deeper than 2", r.Raw)
		}
		if err := checkBlobFile(r.Dir, "index", d, MaxManifestBytes); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
		child, err := ii.ImageIndex(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
		if err := verifyIndex(child, *d); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
		cm, err := child.IndexManifest()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
		if d, err = res.pick(cm.Manifests, rem); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
		ii = child
	}
	if err := checkBlobFile(r.Dir, "manifest", d, MaxManifestBytes); err != nil {
		return nil, fmt.Errorf("%s: %w", r.Raw, err)
	}
	img, err := ii.Image(d.Digest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Raw, err)
	}
	if err := verifyManifest(img, d); err != nil {
		return nil, fmt.Errorf("%s: %w", r.Raw, err)
	}
	res.Image = img
	return res, nil
}

// pick chooses rem's platform among an index's manifests and records it.
func (res *Resolved) pick(descs []v1.Descriptor, rem Remote) (*v1.Descriptor, error) {
	d, err := pickPlatform(descs, rem)
	if err != nil {
		return nil, err
	}
	res.Index, res.Platform, res.Defaulted = true, rem.platform().String(), rem.Platform == nil
	return d, nil
}

// selectManifests are the entries of index.json the reference names.
func selectManifests(r *Ref, all []v1.Descriptor) []v1.Descriptor {
	var picks []v1.Descriptor
	for _, d := range all {
		switch {
		case r.Digest != "":
			if d.Digest.String() == r.Digest {
				picks = append(picks, d)
			}
		case r.RefName != "":
			if d.Annotations[RefNameAnnotation] == r.RefName {
				picks = append(picks, d)
			}
		default:
			picks = append(picks, d)
		}
	}
	return picks
}

// allPlatforms reports whether every descriptor names a platform: the
// manifests of one multi-platform image.
func allPlatforms(descs []v1.Descriptor) bool {
	for _, d := range descs {
		if d.Platform == nil || !d.MediaType.IsImage() {
			return false
		}
	}
	return true
}

// checkBlobFile refuses a layout blob that its descriptor, or the file
// itself, says is larger than max, before it is read whole.
func checkBlobFile(dir, what string, d *v1.Descriptor, max int64) error {
	if err := checkSize(what+" "+d.Digest.String(), d.Size, max); err != nil {
		return err
	}
	fi, err := os.Stat(filepath.Join(dir, "blobs", d.Digest.Algorithm, d.Digest.Hex))
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, d.Digest, err)
	}
	return checkSize(what+" "+d.Digest.String(), fi.Size(), max)
}

// openTarball opens a docker-save tarball after checking that none of
// its JSON files (manifest.json, the config) is larger than a config may
// be: go-containerregistry reads them whole.
func openTarball(r *Ref) (*Resolved, error) {
	f, _, err := bounded.Open(r.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: reading docker-save tarball: %w", r.Path, err)
		}
		if strings.HasSuffix(h.Name, ".json") {
			if err := checkSize(h.Name, h.Size, MaxConfigBytes); err != nil {
				return nil, fmt.Errorf("%s: %w", r.Path, err)
			}
		}
	}
	img, err := tarball.ImageFromPath(r.Path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: reading docker-save tarball: %w", r.Path, err)
	}
	return &Resolved{Image: img}, nil
}

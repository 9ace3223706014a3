package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// RefNameAnnotation names an image inside an OCI layout's index.json.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// Remote configures registry access. The zero value uses go-containerregistry's
// default keychain (docker config, credential helpers), linux/amd64 for
// multi-platform bases and the library's default retries.
type Remote struct {
	Keychain  authn.Keychain
	Platform  *v1.Platform
	Transport http.RoundTripper
	// Retries, when set, replaces the library's retry backoff (tests use
	// a short one).
	Retries *remote.Backoff
}

func (r Remote) options(ctx context.Context) []remote.Option {
	kc := r.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc)}
	if r.Platform != nil {
		opts = append(opts, remote.WithPlatform(*r.Platform))
	}
	if r.Transport != nil {
		opts = append(opts, remote.WithTransport(r.Transport))
	}
	if r.Retries != nil {
		opts = append(opts, remote.WithRetryBackoff(*r.Retries))
	}
	return opts
}

// Ref is a parsed image reference: a registry reference, an OCI layout
// (oci:DIR, oci:DIR:NAME, oci:DIR@sha256:...) or a docker-save tarball (a
// path to a file).
type Ref struct {
	Raw string
	// Registry reference (Kind "registry").
	Name name.Reference
	// Layout directory and selector (Kind "layout").
	Dir     string
	RefName string // ref.name annotation to select, "" for the only image
	Digest  string // manifest digest to select
	// Tarball path (Kind "tarball").
	Path string
	Kind string // "registry", "layout", "tarball"
}

func (r *Ref) String() string { return r.Raw }

// Recorded is the reference as a built image records it (manifest and the
// base-name label). A registry reference is kept as written; a local base is
// named by its file or directory name and selector alone, so the same base
// gives the same digest however its path was spelled (oci:./b, oci:/abs/b).
func (r *Ref) Recorded() string {
	switch r.Kind {
	case "layout":
		s := "oci:" + filepath.Base(filepath.Clean(r.Dir))
		if r.RefName != "" {
			s += ":" + r.RefName
		}
		if r.Digest != "" {
			s += "@" + r.Digest
		}
		return s
	case "tarball":
		return filepath.Base(filepath.Clean(r.Path))
	}
	return r.Raw
}

// ParseRef parses an image reference as the command line takes it.
func ParseRef(s string) (*Ref, error) {
	if s == "" {
		return nil, errors.New("empty image reference")
	}
	if rest, ok := strings.CutPrefix(s, "oci:"); ok {
		r := &Ref{Raw: s, Kind: "layout"}
		if i := strings.LastIndex(rest, "@sha256:"); i >= 0 {
			r.Digest = rest[i+1:]
			rest = rest[:i]
			if _, err := v1.NewHash(r.Digest); err != nil {
				return nil, fmt.Errorf("%s: bad digest: %w", s, err)
			}
		} else if i := strings.LastIndexByte(rest, ':'); i > 0 && !strings.Contains(rest[i:], "/") {
			// oci:DIR:NAME, unless DIR itself (with its colon) exists.
			if st, err := os.Stat(rest); err != nil || !st.IsDir() {
				r.RefName = rest[i+1:]
				rest = rest[:i]
			}
		}
		if rest == "" {
			return nil, fmt.Errorf("%s: no layout directory", s)
		}
		r.Dir = rest
		return r, nil
	}
	if st, err := os.Stat(s); err == nil && st.Mode().IsRegular() {
		return &Ref{Raw: s, Kind: "tarball", Path: s}, nil
	}
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") {
		return nil, fmt.Errorf("%s: no such file (a docker-save tarball), and not an image reference", s)
	}
	n, err := name.ParseReference(s)
	if err != nil {
		return nil, fmt.Errorf("%s: not an image reference: %w", s, err)
	}
	return &Ref{Raw: s, Kind: "registry", Name: n}, nil
}

// Open fetches the image a reference names. Nothing is downloaded beyond
// the manifest and config: layers stream when they are read.
func Open(ctx context.Context, r *Ref, rem Remote) (v1.Image, error) {
	switch r.Kind {
	case "layout":
		return openLayout(r)
	case "tarball":
		img, err := tarball.ImageFromPath(r.Path, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: reading docker-save tarball: %w", r.Path, err)
		}
		return img, nil
	case "registry":
		img, err := remote.Image(r.Name, rem.options(ctx)...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w%s", r.Raw, err, offlineHint(err))
		}
		return img, nil
	}
	return nil, fmt.Errorf("%s: unknown reference kind %q", r.Raw, r.Kind)
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

func openLayout(r *Ref) (v1.Image, error) {
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
	var picks []v1.Descriptor
	for _, d := range im.Manifests {
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
	switch {
	case len(picks) == 0 && (r.Digest != "" || r.RefName != ""):
		return nil, fmt.Errorf("%s: no image %s%s in the layout", r.Dir, r.RefName, r.Digest)
	case len(picks) == 0:
		return nil, fmt.Errorf("%s: the layout holds no image", r.Dir)
	case len(picks) > 1 && r.Digest == "":
		var names []string
		for _, d := range picks {
			if n := d.Annotations[RefNameAnnotation]; n != "" {
				names = append(names, n)
			}
		}
		return nil, fmt.Errorf("%s: the layout holds %d images; name one as oci:%s:NAME (%s)", r.Dir, len(picks), r.Dir, strings.Join(names, ", "))
	}
	d := picks[0]
	if d.MediaType.IsIndex() {
		child, err := ii.ImageIndex(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
		if err := verifyIndex(child, d); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Raw, err)
		}
		return pickPlatform(r, child)
	}
	img, err := ii.Image(d.Digest)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Raw, err)
	}
	if err := verifyManifest(img, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", r.Raw, err)
	}
	return img, nil
}

func pickPlatform(r *Ref, ii v1.ImageIndex) (v1.Image, error) {
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Raw, err)
	}
	for _, d := range im.Manifests {
		if d.MediaType.IsImage() && (d.Platform == nil || (d.Platform.OS == "linux" && d.Platform.Architecture == "amd64")) {
			img, err := ii.Image(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.Raw, err)
			}
			if err := verifyManifest(img, &d); err != nil {
				return nil, fmt.Errorf("%s: %w", r.Raw, err)
			}
			return img, nil
		}
	}
	return nil, fmt.Errorf("%s: no linux/amd64 image in the index", r.Raw)
}

// isOCI reports whether img's manifest is an OCI one (else Docker schema 2).
func isOCI(img v1.Image) bool {
	mt, err := img.MediaType()
	return err == nil && mt == types.OCIManifestSchema1
}

// absDir makes a layout directory absolute for refs files.
func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}

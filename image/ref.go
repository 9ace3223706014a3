package image

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// RefNameAnnotation names an image inside an OCI layout's index.json.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

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

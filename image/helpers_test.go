package image

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// tent is one entry of a test layer: a file (Body), a directory (Dir), a
// symlink (Link) or a hard link (Hard).
type tent struct {
	Name string
	Body string
	Mode int64
	Dir  bool
	Link string
	Hard string
}

func tarBytes(t testing.TB, ents []tent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, Typeflag: tar.TypeReg, Size: int64(len(e.Body))}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		switch {
		case e.Dir:
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o755
		case e.Link != "":
			h.Typeflag, h.Size, h.Linkname = tar.TypeSymlink, 0, e.Link
		case e.Hard != "":
			h.Typeflag, h.Size, h.Linkname = tar.TypeLink, 0, e.Hard
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := io.WriteString(tw, e.Body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func testLayer(t testing.TB, ents []tent) v1.Layer {
	t.Helper()
	b := tarBytes(t, ents)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func testImage(t testing.TB, layers ...[]tent) v1.Image {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, ents := range layers {
		var err error
		img, err = mutate.AppendLayers(img, testLayer(t, ents))
		if err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin", "NCCL_DEBUG=WARN"}
	cf.Config.Entrypoint = []string{"/opt/nvidia/entrypoint.sh"}
	cf.Config.Cmd = []string{"python3"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/smpatch/smpatch/internal/testkit/imagetest"
)

// baseBlobs writes a base layout and returns its directory and manifest.
func baseBlobs(t *testing.T) (string, *v1.Manifest) {
	t.Helper()
	dir := writeBase(t, imagetest.Options{})
	var idx v1.IndexManifest
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	mb, err := os.ReadFile(blobPath(dir, idx.Manifests[0].Digest))
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	return dir, &m
}

func blobPath(dir string, d v1.Hash) string {
	return filepath.Join(dir, "blobs", d.Algorithm, d.Hex)
}

func rewrite(t *testing.T, p string, edit func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// restoredNoCompression re-gzips a stored (level 0) layer after changing
// one byte of its tar: a valid gzip of the same size with other content.
func substituteStored(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	if _, err := tr.Next(); err != nil { // opt/blob/
		t.Fatal(err)
	}
	if _, err := tr.Next(); err != nil {
		t.Fatal(err)
	}
	// The file body starts at the second header's block plus 512.
	raw[1024+10] ^= 0xff
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.NoCompression)
	zw.Write(raw)
	zw.Close()
	if out.Len() != len(b) {
		t.Fatalf("substitute is %d bytes, original %d", out.Len(), len(b))
	}
	return out.Bytes()
}

// TestCorruptBlobs checks that every blob a build or probe reads is
// verified: a flipped byte in a layer's gzip trailer, a same-size layer
// with other content, a changed config or manifest each fail opening the
// base with one line naming the blob.
func TestCorruptBlobs(t *testing.T) {
	cases := []struct {
		name string
		edit func(t *testing.T, dir string, m *v1.Manifest) string // returns the blob named
	}{
		{"gzip trailer", func(t *testing.T, dir string, m *v1.Manifest) string {
			d := m.Layers[len(m.Layers)-1].Digest
			rewrite(t, blobPath(dir, d), func(b []byte) []byte { b[len(b)-6] ^= 1; return b })
			return d.String()
		}},
		{"same-size substitute", func(t *testing.T, dir string, m *v1.Manifest) string {
			d := m.Layers[0].Digest
			rewrite(t, blobPath(dir, d), func(b []byte) []byte { return substituteStored(t, b) })
			return d.String()
		}},
		{"truncated layer", func(t *testing.T, dir string, m *v1.Manifest) string {
			d := m.Layers[1].Digest
			rewrite(t, blobPath(dir, d), func(b []byte) []byte { return b[:len(b)-100] })
			return d.String()
		}},
		{"config", func(t *testing.T, dir string, m *v1.Manifest) string {
			rewrite(t, blobPath(dir, m.Config.Digest), func(b []byte) []byte {
				return bytes.Replace(b, []byte("NCCL_DEBUG=WARN"), []byte("NCCL_DEBUG=INFO"), 1)
			})
			return m.Config.Digest.String()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, m := baseBlobs(t)
			blob := tc.edit(t, dir, m)
			_, err := OpenBase(context.Background(), "oci:"+dir, Remote{}, FSOptions{IndexCache: t.TempDir()})
			if err == nil {
				t.Fatal("a corrupt base opened")
			}
			if !errors.Is(err, ErrDigest) && tc.name != "truncated layer" {
				t.Errorf("error does not wrap ErrDigest: %v", err)
			}
			if msg := err.Error(); !strings.Contains(msg, blob) || strings.Contains(msg, "\n") {
				t.Errorf("error does not name %s on one line: %v", blob, msg)
			}
		})
	}
	t.Run("manifest", func(t *testing.T) {
		dir, _ := baseBlobs(t)
		var idx v1.IndexManifest
		b, _ := os.ReadFile(filepath.Join(dir, "index.json"))
		json.Unmarshal(b, &idx)
		d := idx.Manifests[0].Digest
		rewrite(t, blobPath(dir, d), func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"schemaVersion":2`), []byte(`"schemaVersion": 2`), 1)
		})
		_, err := OpenBase(context.Background(), "oci:"+dir, Remote{}, FSOptions{})
		if err == nil || !errors.Is(err, ErrDigest) || !strings.Contains(err.Error(), d.String()) {
			t.Errorf("changed manifest: %v", err)
		}
	})
}

// TestCorruptLayerAfterIndexCache checks that a layer changed after its
// index was cached still fails the read of a file in it.
func TestCorruptLayerAfterIndexCache(t *testing.T) {
	dir, m := baseBlobs(t)
	cache := t.TempDir()
	if _, err := OpenBase(context.Background(), "oci:"+dir, Remote{}, FSOptions{IndexCache: cache}); err != nil {
		t.Fatal(err)
	}
	// The project layer is the one after the random ones.
	d := m.Layers[2].Digest
	rewrite(t, blobPath(dir, d), func(b []byte) []byte { b[len(b)-6] ^= 1; return b })
	b, err := OpenBase(context.Background(), "oci:"+dir, Remote{}, FSOptions{IndexCache: cache})
	if err != nil {
		t.Fatal(err) // indexed from the cache: the layer is not read yet
	}
	_, err = b.FS.ReadFile(sp + "/sglang/version.py")
	if err == nil || !errors.Is(err, ErrDigest) || !strings.Contains(err.Error(), d.String()) {
		t.Errorf("read from a corrupt layer: %v", err)
	}
}

// TestCorruptRegistryBlob checks a registry base: a registry that serves
// a layer whose gzip trailer has a flipped byte fails the base with the
// layer named.
func TestCorruptRegistryBlob(t *testing.T) {
	var bad string
	host := testRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if bad == "" || r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/blobs/"+bad) {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			b := rec.Body.Bytes()
			if len(b) > 6 {
				b[len(b)-6] ^= 1
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(b)
		})
	})
	base := openBase(t, "oci:"+writeBase(t, imagetest.Options{}))
	ref := host + "/lmsysorg/sglang:v1"
	dst, tag, err := ParseDestination(ref, fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Put(context.Background(), tag, base.img); err != nil {
		t.Fatal(err)
	}
	m, _ := base.img.Manifest()
	bad = m.Layers[len(m.Layers)-1].Digest.String()
	_, err = OpenBase(context.Background(), ref, fast, FSOptions{IndexCache: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "\n") {
		t.Errorf("corrupt registry blob: %v", err)
	}
}

// TestCorruptTarballLayer checks a docker-save tarball base: a layer
// whose bytes do not match the config's diff id fails the base.
func TestCorruptTarballLayer(t *testing.T) {
	img := testImage(t, []tent{{Name: "sp/a", Body: strings.Repeat("a", 4096)}}, []tent{{Name: "sp/b", Body: strings.Repeat("b", 4096)}})
	// Swap the layers' diff ids in the config: each layer is intact, and
	// each names the other's content.
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	d := cf.RootFS.DiffIDs
	d[0], d[1] = d[1], d[0]
	img, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "base.tar")
	tg, _ := name.NewTag("example.com/base:v1")
	if err := tarball.WriteToFile(p, tg, img); err != nil {
		t.Fatal(err)
	}
	_, err = OpenBase(context.Background(), p, Remote{}, FSOptions{Keep: keepAll})
	if err == nil || !errors.Is(err, ErrDigest) || !strings.Contains(err.Error(), "diff id") {
		t.Errorf("tarball layer against a wrong diff id: %v", err)
	}
}

// TestFSReadCancelled checks that a read from the image stops once the
// context the FS was made with is done (Ctrl-C during a build).
func TestFSReadCancelled(t *testing.T) {
	dir, _ := baseBlobs(t)
	ctx, cancel := context.WithCancel(context.Background())
	b, err := OpenBase(ctx, "oci:"+dir, Remote{}, FSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := b.FS.ReadFile(sp + "/sglang/version.py"); !errors.Is(err, context.Canceled) {
		t.Errorf("read after cancel: %v", err)
	}
}

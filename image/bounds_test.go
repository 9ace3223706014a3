package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/smpatch/smpatch/internal/testkit/imagetest"
)

// editManifest rewrites the manifest of the layout's only image with edit
// and points index.json at the new one.
func editManifest(t *testing.T, dir string, edit func(m *v1.Manifest)) {
	t.Helper()
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
	edit(&m)
	if mb, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(mb)
	d := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(s[:])}
	if err := os.WriteFile(blobPath(dir, d), mb, 0o644); err != nil {
		t.Fatal(err)
	}
	idx.Manifests[0].Digest, idx.Manifests[0].Size = d, int64(len(mb))
	if b, err = json.Marshal(idx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBounds checks that what an image claims is bounded before it is
// read: a config descriptor of 8 GiB, a manifest of 300 layers, an
// index.json over 4 MiB, a docker-save tarball's manifest.json over
// 16 MiB.
func TestBounds(t *testing.T) {
	ctx := context.Background()
	open := func(ref string) error {
		_, err := OpenBase(ctx, ref, Remote{}, FSOptions{})
		return err
	}
	dir := writeBase(t, imagetest.Options{})
	editManifest(t, dir, func(m *v1.Manifest) { m.Config.Size = 8 << 30 })
	if err := open("oci:" + dir); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "config sha256:") || !strings.Contains(err.Error(), "8589934592 bytes") {
		t.Errorf("an 8 GiB config: %v", err)
	}

	dir = writeBase(t, imagetest.Options{})
	editManifest(t, dir, func(m *v1.Manifest) {
		for len(m.Layers) < 300 {
			m.Layers = append(m.Layers, m.Layers[0])
		}
	})
	if err := open("oci:" + dir); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "300 layers") {
		t.Errorf("300 layers: %v", err)
	}

	dir = writeBase(t, imagetest.Options{})
	b, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	b = append(b, bytes.Repeat([]byte(" "), MaxManifestBytes)...)
	os.WriteFile(filepath.Join(dir, "index.json"), b, 0o644)
	if err := open("oci:" + dir); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "index.json") {
		t.Errorf("a big index.json: %v", err)
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := append(bytes.Repeat([]byte(" "), MaxConfigBytes), "[]"...)
	tw.WriteHeader(&tar.Header{Name: "manifest.json", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
	tw.Write(body)
	tw.Close()
	p := filepath.Join(t.TempDir(), "big.tar")
	os.WriteFile(p, buf.Bytes(), 0o644)
	if err := open(p); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "manifest.json") {
		t.Errorf("a big manifest.json: %v", err)
	}
}

// TestEntryBound checks that a layer of more entries than the index takes
// is refused, naming the layer.
func TestEntryBound(t *testing.T) {
	defer func(n int) { maxEntries = n }(maxEntries)
	maxEntries = 5
	img := testImage(t, []tent{{Name: "sp/a", Body: "a"}, {Name: "sp/b", Body: "b"}, {Name: "sp/c", Body: "c"}, {Name: "sp/d", Body: "d"}, {Name: "sp/e", Body: "e"}, {Name: "sp/f", Body: "f"}})
	_, err := NewFS(context.Background(), img, FSOptions{Keep: keepAll})
	if err == nil || !strings.Contains(err.Error(), "more than 5 entries") || !strings.Contains(err.Error(), "layer sha256:") {
		t.Errorf("a layer of 6 entries: %v", err)
	}
	maxEntries = 6
	if _, err := NewFS(context.Background(), img, FSOptions{Keep: keepAll}); err != nil {
		t.Errorf("a layer of 6 entries, 6 allowed: %v", err)
	}
}

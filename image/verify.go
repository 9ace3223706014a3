package image

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Every blob smpatch reads from an image is checked against the digest and
// size that name it: a manifest against its index or layout descriptor, the
// config against the manifest, and each layer as it is streamed, the
// compressed bytes against the manifest's digest and size and the tar
// stream against the config's diff id. A layer stream is read to its end
// before its bytes are trusted, even when the reader needs only its first
// entries.

// ErrDigest is wrapped by every error about a blob that does not match the
// digest or size that names it.
var ErrDigest = errors.New("does not match its digest")

// checkBlob verifies b against the descriptor digest and size.
func checkBlob(what string, b []byte, d v1.Hash, size int64) error {
	if d.Algorithm != "sha256" {
		return fmt.Errorf("%s %s: unsupported digest algorithm %q", what, d, d.Algorithm)
	}
	s := sha256.Sum256(b)
	got := hex.EncodeToString(s[:])
	if got != d.Hex {
		return fmt.Errorf("%s %s: content %w (got sha256:%s)", what, d, ErrDigest, got)
	}
	if size >= 0 && int64(len(b)) != size {
		return fmt.Errorf("%s %s: %d bytes, its descriptor says %d: size %w", what, d, len(b), size, ErrDigest)
	}
	return nil
}

// verifyManifest checks an image's manifest bytes against the descriptor
// that named it, its bounds (checkImage), and its config blob against the
// manifest.
func verifyManifest(img v1.Image, desc *v1.Descriptor) error {
	raw, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("reading manifest: %w", err)
	}
	if desc != nil {
		if err := checkBlob("manifest", raw, desc.Digest, desc.Size); err != nil {
			return err
		}
	}
	if err := checkImage(img); err != nil {
		return err
	}
	return verifyConfig(img)
}

func verifyConfig(img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("reading manifest: %w", err)
	}
	cb, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("reading config %s: %w", m.Config.Digest, err)
	}
	return checkBlob("config", cb, m.Config.Digest, m.Config.Size)
}

// verifyIndex checks an image index's bytes against the descriptor that
// named it.
func verifyIndex(ii v1.ImageIndex, desc v1.Descriptor) error {
	raw, err := ii.RawManifest()
	if err != nil {
		return fmt.Errorf("reading index %s: %w", desc.Digest, err)
	}
	return checkBlob("index", raw, desc.Digest, desc.Size)
}

// layerCheck is what one layer's streams are verified against.
type layerCheck struct {
	digest v1.Hash // compressed, from the manifest ("" when not known)
	size   int64
	diffID v1.Hash // uncompressed, from the config
}

// cacheKey names the layer's entry in the index cache: the digest that
// is verified whenever the layer is read.
func (c layerCheck) cacheKey() string {
	if c.digest.Hex != "" {
		return c.digest.Algorithm + "-" + c.digest.Hex
	}
	return "diffid-" + c.diffID.Algorithm + "-" + c.diffID.Hex
}

func (c layerCheck) name() string {
	if c.digest.Hex != "" {
		return c.digest.String()
	}
	return "with diff id " + c.diffID.String()
}

// layerChecks reads the digests img's layers must match. With diffOnly (a
// docker-save tarball, whose layers are stored uncompressed and whose
// compressed digests would take compressing every layer to know) only the
// config's diff ids are used.
func layerChecks(img v1.Image, n int, diffOnly bool) ([]layerCheck, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	if len(cf.RootFS.DiffIDs) != n {
		return nil, fmt.Errorf("config lists %d layer diff ids for %d layers", len(cf.RootFS.DiffIDs), n)
	}
	out := make([]layerCheck, n)
	for i := range out {
		out[i].diffID = cf.RootFS.DiffIDs[i]
		out[i].size = -1
	}
	if diffOnly {
		return out, nil
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	if len(m.Layers) != n {
		return nil, fmt.Errorf("manifest lists %d layers, the image has %d", len(m.Layers), n)
	}
	for i, d := range m.Layers {
		out[i].digest, out[i].size = d.Digest, d.Size
	}
	return out, nil
}

// hashReader hashes and counts what passes through it and, at EOF,
// returns an error when the bytes do not match want (and size, when >= 0).
// A stream longer than size fails as soon as it passes it.
type hashReader struct {
	r    io.Reader
	h    hash.Hash
	n    int64
	want v1.Hash
	size int64
	what string
	done bool
	err  error
}

func newHashReader(r io.Reader, want v1.Hash, size int64, what string) *hashReader {
	return &hashReader{r: r, h: sha256.New(), want: want, size: size, what: what}
}

func (v *hashReader) Read(p []byte) (int, error) {
	if v.done {
		return 0, v.finalErr()
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.size >= 0 && v.n > v.size {
		v.done = true
		v.err = fmt.Errorf("%s: longer than the %d bytes its descriptor says: size %w", v.what, v.size, ErrDigest)
		return 0, v.err
	}
	if err == io.EOF {
		v.done = true
		if v.size >= 0 && v.n != v.size {
			v.err = fmt.Errorf("%s: %d bytes, its descriptor says %d: size %w", v.what, v.n, v.size, ErrDigest)
		} else if got := hex.EncodeToString(v.h.Sum(nil)); v.want.Algorithm != "sha256" || got != v.want.Hex {
			v.err = fmt.Errorf("%s: content %w (got sha256:%s)", v.what, ErrDigest, got)
		}
		return n, v.finalErr()
	}
	return n, err
}

func (v *hashReader) finalErr() error {
	if v.err != nil {
		return v.err
	}
	return io.EOF
}

// verifiedStream is a layer's tar stream whose Close (or Drain) reads the
// rest of the layer and reports a digest mismatch.
type verifiedStream struct {
	io.Reader
	closers []io.Closer
	drained bool
	err     error
}

// Drain reads what is left of the layer and returns the verification
// error, if any (nil when every digest matched).
func (s *verifiedStream) Drain() error {
	if s.drained {
		return s.err
	}
	s.drained = true
	_, err := io.Copy(io.Discard, s.Reader)
	s.err = err
	return err
}

func (s *verifiedStream) Close() error {
	var first error
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i].Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// openVerified opens layer l's uncompressed tar stream, hashing the
// compressed bytes against c.digest and c.size when they are known, else
// the tar against c.diffID. Decompression (gzip, zstd or none) is
// go-containerregistry's. Mismatches surface as read errors at the end of
// the stream: callers Drain it before trusting what they read.
func openVerified(l v1.Layer, c layerCheck) (*verifiedStream, error) {
	what := "layer " + c.name()
	if c.digest.Hex == "" {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", what, err)
		}
		return &verifiedStream{Reader: newHashReader(rc, c.diffID, -1, what+" (uncompressed)"), closers: []io.Closer{rc}}, nil
	}
	cl := &checkedLayer{Layer: l, c: c, what: what}
	ul, err := partial.CompressedToLayer(cl)
	if err != nil {
		return nil, err
	}
	rc, err := ul.Uncompressed()
	if err != nil {
		if cl.hr != nil {
			if derr := cl.drain(); derr != nil {
				err = derr
			}
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	// The compressed digest names the bytes exactly, so the tar stream
	// needs no second hash; the compressed stream is read to its end (a
	// gzip trailer follows the tar's end) before the digest is known.
	return &verifiedStream{Reader: &wrapErr{r: rc, what: what, rest: cl}, closers: []io.Closer{rc}}, nil
}

// checkedLayer is a layer whose compressed stream is hashed against the
// digest and size the manifest gives it.
type checkedLayer struct {
	v1.Layer
	c    layerCheck
	what string
	hr   *hashReader // the compressed stream, once opened
}

func (l *checkedLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", l.what, err)
	}
	l.hr = newHashReader(rc, l.c.digest, l.c.size, l.what)
	return struct {
		io.Reader
		io.Closer
	}{l.hr, rc}, nil
}

// drain reads the rest of the compressed stream: its error is the digest
// mismatch, if any.
func (l *checkedLayer) drain() error {
	_, err := io.Copy(io.Discard, l.hr)
	return err
}

// wrapErr names the layer in decompression errors (a gzip checksum
// mismatch says nothing of which blob it was). At the end of the
// decompressed stream, and on a decompression error, it reads the
// compressed stream to its end: a digest mismatch there is the report.
type wrapErr struct {
	r    io.Reader
	what string
	rest *checkedLayer
}

func (w *wrapErr) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if err == io.EOF {
		// Whatever follows the compressed data is part of the blob too.
		if derr := w.rest.drain(); derr != nil {
			return n, derr
		}
		return n, err
	}
	if err != nil && !errors.Is(err, ErrDigest) {
		if derr := w.rest.drain(); errors.Is(derr, ErrDigest) {
			return n, derr
		}
		err = fmt.Errorf("%s: %w", w.what, err)
	}
	return n, err
}

// verifyingImage hands out layers whose compressed streams are checked
// against their digests, so a base blob copied into a destination is
// verified on the way.
type verifyingImage struct{ v1.Image }

func (v verifyingImage) Layers() ([]v1.Layer, error) {
	ls, err := v.Image.Layers()
	if err != nil {
		return nil, err
	}
	out := make([]v1.Layer, len(ls))
	for i, l := range ls {
		out[i] = verifyingLayer{l}
	}
	return out, nil
}

func (v verifyingImage) LayerByDigest(h v1.Hash) (v1.Layer, error) {
	l, err := v.Image.LayerByDigest(h)
	if err != nil {
		return nil, err
	}
	return verifyingLayer{l}, nil
}

type verifyingLayer struct{ v1.Layer }

func (l verifyingLayer) Compressed() (io.ReadCloser, error) {
	d, err := l.Layer.Digest()
	if err != nil {
		return nil, err
	}
	size, err := l.Layer.Size()
	if err != nil {
		return nil, err
	}
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{newHashReader(rc, d, size, "layer "+d.String()), rc}, nil
}

// MediaType keeps the layer's own.
func (l verifyingLayer) MediaType() (types.MediaType, error) { return l.Layer.MediaType() }

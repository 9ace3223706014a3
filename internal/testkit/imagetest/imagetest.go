package imagetest

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/smpatch/smpatch/internal/testkit/synth"
)

// SitePackages is where the synthetic sglang is installed.
const SitePackages = "usr/local/lib/python3.12/dist-packages"

// Communicator is the synthetic communicator.py. It stands for sglang's
// python/sglang/srt/layers/communicator.py in the C3 shape (late 2025):
// apply_flashinfer_allreduce_fusion gated on SM90/SM100, flags from
// sglang.srt.utils. It is written for tests, not copied.
const Communicator = `import torch

from sglang.srt.utils import is_cuda, is_sm90_supported, is_sm100_supported

_is_cuda = is_cuda()
_is_sm90_supported = _is_cuda and is_sm90_supported()
_is_sm100_supported = _is_cuda and is_sm100_supported()


def apply_flashinfer_allreduce_fusion(batch_size: int):
    return (
        (_is_sm90_supported or _is_sm100_supported)
        and batch_size > 0
        and batch_size <= 4096
    )


class LayerCommunicator:
    def __init__(self, layer_id):
        self.layer_id = layer_id
`

// SGLangFiles is the synthetic installed sglang 0.5.6 (a wheel install),
// paths relative to SitePackages.
func SGLangFiles(version string) map[string]string {
	return map[string]string{
		"sglang/__init__.py":                                         "from sglang.version import __version__\n",
		"sglang/version.py":                                          fmt.Sprintf("__version__ = %q\n", version),
		"sglang/srt/__init__.py":                                     "",
		"sglang/srt/layers/__init__.py":                              "",
		"sglang/srt/layers/communicator.py":                          Communicator,
		"sglang/srt/layers/__pycache__/communicator.cpython-312.pyc": "\x00stale bytecode 312",
		"sglang/srt/layers/__pycache__/communicator.cpython-311.pyc": "\x00stale bytecode 311",
		"sglang/srt/layers/__pycache__/layernorm.cpython-312.pyc":    "\x00other bytecode",
		"sglang/srt/server_args.py":                                  "class ServerArgs:\n    enable_flashinfer_allreduce_fusion = False\n",
		"sglang/srt/legacy_gate.py":                                  "GATE = [9, 10]\n",
		"sglang-" + version + ".dist-info/METADATA":                  "Metadata-Version: 2.1\nName: sglang\nVersion: " + version + "\n\n",
		"sglang-" + version + ".dist-info/RECORD":                    "",
		"torch/__init__.py":                                          "",
		"torch-2.9.0.dist-info/METADATA":                             "Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n\n",
	}
}

var versionRe = regexp.MustCompile(`__version__\s*=\s*["']([^"']+)["']`)

// ShapeFiles is an internal/synth shape of sglang as installed in
// site-packages: python/sglang/... becomes sglang/..., with a dist-info of
// the shape's version and stale bytecode beside every module.
func ShapeFiles(shape string) (map[string]string, error) {
	tree := synth.SGLangTree(shape, false)
	if tree == nil {
		return nil, fmt.Errorf("unknown shape %q (shapes: %s)", shape, strings.Join(synth.Shapes(), ", "))
	}
	files := map[string]string{}
	ver := "0.0.0"
	for rel, b := range tree {
		pkg, ok := strings.CutPrefix(rel, "python/")
		if !ok || !strings.HasPrefix(pkg, "sglang/") {
			continue
		}
		files[pkg] = string(b)
		if pkg == "sglang/version.py" {
			if m := versionRe.FindSubmatch(b); m != nil {
				ver = string(m[1])
			}
		}
		if dir, base, ok := cutLast(pkg); ok && strings.HasSuffix(base, ".py") {
			files[dir+"/__pycache__/"+strings.TrimSuffix(base, ".py")+".cpython-312.pyc"] = "\x00stale bytecode"
		}
	}
	if _, ok := files["sglang/__init__.py"]; !ok {
		files["sglang/__init__.py"] = ""
	}
	files["sglang-"+ver+".dist-info/METADATA"] = "Metadata-Version: 2.1\nName: sglang\nVersion: " + ver + "\n\n"
	return files, nil
}

func cutLast(p string) (string, string, bool) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p, false
	}
	return p[:i], p[i+1:], true
}

// Options shape a synthetic base.
type Options struct {
	// RandomLayers random layers of RandomBytes bytes each come first
	// (each holds one file of incompressible bytes under opt/blob/).
	RandomLayers int
	RandomBytes  int64
	Seed         uint64
	// Version of the synthetic sglang; "" means 0.5.6.
	Version string
	// NoProject leaves sglang out (a base "without the project").
	NoProject bool
	// Files replaces the synthetic sglang files (relative to SitePackages).
	Files map[string]string
	// Shape installs one of internal/synth's upstream shapes of sglang
	// ("c5-s5", ...) instead, with a dist-info of its version.
	Shape string
	// Extra files (paths from the image root) go into the project layer.
	Extra map[string]string
	// Docker writes Docker schema 2 media types instead of OCI ones.
	Docker bool
	// Platform is the image's OS/ARCH[/VARIANT]; "" means linux/amd64.
	Platform string
}

// Write writes a base image as an OCI layout in dir (created) and returns
// its manifest digest. Layers are written streaming, gzip-compressed.
func Write(dir string, o Options) (v1.Hash, error) {
	d, err := writeImage(dir, o)
	if err != nil {
		return v1.Hash{}, err
	}
	d.Annotations = map[string]string{"org.opencontainers.image.ref.name": "base"}
	return d.Digest, writeIndexJSON(dir, []v1.Descriptor{d})
}

// WriteIndex writes one image per options (each with its Platform) and a
// multi-platform index of them into the OCI layout dir, and returns the
// index's digest. nested: index.json names the index (ref.name "base", as
// skopeo copy --all writes it); else index.json is the index itself (as
// crane pull --format oci writes it).
func WriteIndex(dir string, nested bool, images ...Options) (v1.Hash, error) {
	var descs []v1.Descriptor
	for _, o := range images {
		d, err := writeImage(dir, o)
		if err != nil {
			return v1.Hash{}, err
		}
		p, err := platform(o.Platform)
		if err != nil {
			return v1.Hash{}, err
		}
		d.Platform = &p
		descs = append(descs, d)
	}
	if !nested {
		return v1.Hash{}, writeIndexJSON(dir, descs)
	}
	ib, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: descs})
	if err != nil {
		return v1.Hash{}, err
	}
	id, err := writeBlob(filepath.Join(dir, "blobs", "sha256"), ib)
	if err != nil {
		return v1.Hash{}, err
	}
	return id, writeIndexJSON(dir, []v1.Descriptor{{
		MediaType: types.OCIImageIndex, Size: int64(len(ib)), Digest: id,
		Annotations: map[string]string{"org.opencontainers.image.ref.name": "base"},
	}})
}

func platform(s string) (v1.Platform, error) {
	if s == "" {
		return v1.Platform{OS: "linux", Architecture: "amd64"}, nil
	}
	p, err := v1.ParsePlatform(s)
	if err != nil {
		return v1.Platform{}, err
	}
	return *p, nil
}

func writeIndexJSON(dir string, descs []v1.Descriptor) error {
	ib, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: descs})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), ib, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
}

// writeImage writes one image's blobs into dir and returns its manifest's
// descriptor.
func writeImage(dir string, o Options) (v1.Descriptor, error) {
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return v1.Descriptor{}, err
	}
	layerMT, cfgMT, manMT := types.OCILayer, types.OCIConfigJSON, types.OCIManifestSchema1
	if o.Docker {
		layerMT, cfgMT, manMT = types.DockerLayer, types.DockerConfigJSON, types.DockerManifestSchema2
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	var layers []v1.Descriptor
	var diffIDs []v1.Hash
	var history []v1.History
	addLayer := func(write func(tw *tar.Writer) error, level int, what string) error {
		d, diff, size, err := writeLayer(blobs, level, write)
		if err != nil {
			return err
		}
		layers = append(layers, v1.Descriptor{MediaType: layerMT, Size: size, Digest: d})
		diffIDs = append(diffIDs, diff)
		history = append(history, v1.History{Created: v1.Time{Time: time.Unix(0, 0).UTC()}, CreatedBy: what})
		return nil
	}
	for i := 0; i < o.RandomLayers; i++ {
		n := o.RandomBytes
		err := addLayer(func(tw *tar.Writer) error {
			if err := tw.WriteHeader(&tar.Header{Name: "opt/blob/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
				return err
			}
			h := &tar.Header{Name: fmt.Sprintf("opt/blob/layer%d.bin", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: n}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err := io.CopyN(tw, randReader{rng}, n)
			return err
		}, gzip.NoCompression, fmt.Sprintf("random layer %d", i))
		if err != nil {
			return v1.Descriptor{}, err
		}
	}
	files := o.Files
	if o.Shape != "" && !o.NoProject {
		var err error
		if files, err = ShapeFiles(o.Shape); err != nil {
			return v1.Descriptor{}, err
		}
	}
	if files == nil && !o.NoProject {
		v := o.Version
		if v == "" {
			v = "0.5.6"
		}
		files = SGLangFiles(v)
	}
	// The project layer, with a file that an upper layer whites out.
	err := addLayer(func(tw *tar.Writer) error {
		if err := writeDirs(tw, "etc/", "usr/", "usr/local/", "usr/local/lib/", "usr/local/lib/python3.12/", SitePackages+"/"); err != nil {
			return err
		}
		if err := writeFile(tw, "etc/os-release", "ID=synthetic\n"); err != nil {
			return err
		}
		all := map[string]string{}
		for n, b := range files {
			all[SitePackages+"/"+n] = b
		}
		for n, b := range o.Extra {
			all[n] = b
		}
		names := make([]string, 0, len(all))
		for n := range all {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if err := writeFile(tw, n, all[n]); err != nil {
				return err
			}
		}
		return writeFile(tw, SitePackages+"/sglang_hidden_by_upper.py", "removed in the next layer\n")
	}, gzip.DefaultCompression, "pip install sglang")
	if err != nil {
		return v1.Descriptor{}, err
	}
	err = addLayer(func(tw *tar.Writer) error {
		if err := writeFile(tw, SitePackages+"/.wh.sglang_hidden_by_upper.py", ""); err != nil {
			return err
		}
		return writeFile(tw, "etc/motd", "synthetic base\n")
	}, gzip.DefaultCompression, "cleanup")
	if err != nil {
		return v1.Descriptor{}, err
	}

	plat, err := platform(o.Platform)
	if err != nil {
		return v1.Descriptor{}, err
	}
	cfg := v1.ConfigFile{
		Architecture: plat.Architecture,
		OS:           plat.OS,
		Variant:      plat.Variant,
		Created:      v1.Time{Time: time.Unix(0, 0).UTC()},
		Config: v1.Config{
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "NCCL_DEBUG=WARN", "PYTHONUNBUFFERED=1"},
			Entrypoint: []string{"/opt/nvidia/nvidia_entrypoint.sh"},
			Cmd:        []string{"python3"},
			Labels:     map[string]string{"maintainer": "synthetic"},
		},
		RootFS:  v1.RootFS{Type: "layers", DiffIDs: diffIDs},
		History: history,
	}
	cb, err := json.Marshal(cfg)
	if err != nil {
		return v1.Descriptor{}, err
	}
	cd, err := writeBlob(blobs, cb)
	if err != nil {
		return v1.Descriptor{}, err
	}
	man := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     manMT,
		Config:        v1.Descriptor{MediaType: cfgMT, Size: int64(len(cb)), Digest: cd},
		Layers:        layers,
	}
	mb, err := json.Marshal(man)
	if err != nil {
		return v1.Descriptor{}, err
	}
	md, err := writeBlob(blobs, mb)
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: manMT, Size: int64(len(mb)), Digest: md}, nil
}

type randReader struct{ r *rand.Rand }

func (r randReader) Read(p []byte) (int, error) {
	i := 0
	for ; i+8 <= len(p); i += 8 {
		v := r.r.Uint64()
		for k := 0; k < 8; k++ {
			p[i+k] = byte(v >> (8 * k))
		}
	}
	for ; i < len(p); i++ {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}

func writeDirs(tw *tar.Writer, dirs ...string) error {
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(tw *tar.Writer, name, body string) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
		return err
	}
	_, err := io.WriteString(tw, body)
	return err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeLayer streams a layer into blobs: tar -> gzip -> file, hashing the
// uncompressed (diff id) and compressed (digest) streams on the way.
func writeLayer(blobs string, level int, write func(*tar.Writer) error) (v1.Hash, v1.Hash, int64, error) {
	tmp, err := os.CreateTemp(blobs, "layer-*")
	if err != nil {
		return v1.Hash{}, v1.Hash{}, 0, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := tmp.Chmod(0o644); err != nil {
		return v1.Hash{}, v1.Hash{}, 0, err
	}
	zh := sha256.New()
	cw := &countWriter{w: io.MultiWriter(tmp, zh)}
	zw, err := gzip.NewWriterLevel(cw, level)
	if err != nil {
		return v1.Hash{}, v1.Hash{}, 0, err
	}
	dh := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(zw, dh))
	if err := write(tw); err != nil {
		return v1.Hash{}, v1.Hash{}, 0, err
	}
	if err := tw.Close(); err != nil {
		return v1.Hash{}, v1.Hash{}, 0, err
	}
	if err := zw.Close(); err != nil {
		return v1.Hash{}, v1.Hash{}, 0, err
	}
	if err := tmp.Close(); err != nil {
		return v1.Hash{}, v1.Hash{}, 0, err
	}
	d := hashOf(zh)
	if err := os.Rename(tmp.Name(), filepath.Join(blobs, d.Hex)); err != nil {
		return v1.Hash{}, v1.Hash{}, 0, err
	}
	return d, hashOf(dh), cw.n, nil
}

func hashOf(h hash.Hash) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
}

func writeBlob(blobs string, b []byte) (v1.Hash, error) {
	s := sha256.Sum256(b)
	d := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(s[:])}
	return d, os.WriteFile(filepath.Join(blobs, d.Hex), b, 0o644)
}

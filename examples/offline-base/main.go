// Command offline-base writes a small sglang base image as an OCI layout, so
// that `smpatch image apply` and `smpatch matrix build` can be tried on a
// machine that reaches no registry.
//
// The image has one layer: the bundled sample sglang tree
// (examples/sample/sglang/python/sglang) installed under
// /usr/local/lib/python3.12/dist-packages with its dist-info, as pip would
// leave it, and a stale __pycache__ entry that the patch layer whites out.
// It holds no Python and no CUDA: it is for building and inspecting patch
// layers, not for running a server. Its bytes are the same on every run.
//
// usage: go run ./examples/offline-base [-sample DIR] -o DIR
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const sitePackages = "usr/local/lib/python3.12/dist-packages"

func main() {
	sample := flag.String("sample", "examples/sample/sglang", "the sample sglang checkout to install")
	out := flag.String("o", "", "the OCI layout directory to write (created; must not exist or be empty)")
	plat := flag.String("platform", "linux/"+runtime.GOARCH, "the platform the image's config names, OS/ARCH")
	flag.Parse()
	p, err := v1.ParsePlatform(*plat)
	if *out == "" || flag.NArg() != 0 || err != nil || p.OS == "" || p.Architecture == "" {
		fmt.Fprintln(os.Stderr, "usage: offline-base [-sample DIR] [-platform OS/ARCH] -o DIR")
		os.Exit(2)
	}
	if err := run(*sample, *out, p); err != nil {
		fmt.Fprintln(os.Stderr, "offline-base:", err)
		os.Exit(1)
	}
}

func run(sample, out string, plat *v1.Platform) error {
	version, err := sampleVersion(sample)
	if err != nil {
		return err
	}
	files, err := packageFiles(filepath.Join(sample, "python", "sglang"))
	if err != nil {
		return err
	}
	dist := fmt.Sprintf("%s/sglang-%s.dist-info/", sitePackages, version)
	files[dist+"METADATA"] = []byte("Metadata-Version: 2.1\nName: sglang\nVersion: " + version + "\n")
	files[dist+"INSTALLER"] = []byte("pip\n")
	files[sitePackages+"/sglang/srt/layers/__pycache__/communicator.cpython-312.pyc"] = []byte("stale bytecode\n")

	layerBytes, err := tarOf(files)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	epoch := v1.Time{Time: time.Unix(0, 0).UTC()}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: epoch, CreatedBy: "smpatch examples/offline-base: sample sglang " + version},
	})
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Variant = plat.Architecture, plat.OS, plat.Variant
	cfg.Created = epoch
	cfg.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.title": "smpatch offline sglang base " + version}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s: exists and is not empty", out)
	}
	p, err := layout.Write(out, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "latest"})); err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("wrote oci:%s (sglang %s, %s)\n", out, version, d)
	return nil
}

// sampleVersion reads __version__ from python/sglang/version.py.
func sampleVersion(sample string) (string, error) {
	b, err := os.ReadFile(filepath.Join(sample, "python", "sglang", "version.py"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "__version__ = "); ok {
			return strings.Trim(v, `"'`), nil
		}
	}
	return "", fmt.Errorf("%s/python/sglang/version.py: no __version__", sample)
}

// packageFiles maps every regular file under dir to its path in the image.
func packageFiles(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[path.Join(sitePackages, "sglang", filepath.ToSlash(rel))] = b
		return nil
	})
	return files, err
}

// tarOf writes files, with their parent directories, in sorted order and
// with fixed owners and times.
func tarOf(files map[string][]byte) ([]byte, error) {
	names := make([]string, 0, len(files))
	dirs := map[string]bool{}
	for name := range files {
		names = append(names, name)
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			dirs[d+"/"] = true
		}
	}
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		h := &tar.Header{Name: name, Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if strings.HasSuffix(name, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(files[name]))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[name]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/smpatch/smpatch/internal/runner"
	"github.com/smpatch/smpatch/internal/testkit/imagetest"
)

// Shape is the synthetic sglang installed in the base: internal/synth's
// c5-s5 shape (sglang 0.5.17), which the built-in sm120-fusion patches.
const Shape = "c5-s5"

// Busybox is where Debian's busybox-static installs its binary.
const Busybox = "/bin/busybox"

// busyboxApplets are linked in /bin; the fake server needs none of them,
// they are for people and scripts exec'ing into a container.
var busyboxApplets = []string{"sh", "ls", "cat", "sleep", "ps", "wget", "env", "grep", "kill"}

// BuildFakeServer builds testdata/fakeserver (pkg, its directory or import
// path) as a static binary at out.
func BuildFakeServer(pkg, out string) error {
	var b bytes.Buffer
	p, err := runner.Start(context.Background(), runner.Command{
		Argv:    []string{"go", "build", "-trimpath", "-o", out, pkg},
		Env:     append(os.Environ(), "CGO_ENABLED=0"),
		Stdout:  &b,
		Timeout: 10 * time.Minute,
	})
	if err == nil {
		err = p.Wait()
	}
	if err != nil {
		return fmt.Errorf("building the fake server: %v\n%s", err, b.Bytes())
	}
	return nil
}

// Image is the base: layer 1 busybox, layer 2 the fake server, layer 3 the
// installed synthetic sglang. Every entry is owned by root with mtime 0, so
// the same inputs give the same digest.
func Image(busybox, fakeServer string) (v1.Image, error) {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return nil, fmt.Errorf("busybox (apt-get install busybox-static): %w", err)
	}
	if err := static(busybox, bb); err != nil {
		return nil, err
	}
	fs, err := os.ReadFile(fakeServer)
	if err != nil {
		return nil, err
	}
	l1, err := layer(func(tw *tar.Writer) error {
		for _, d := range []string{"bin/", "etc/", "tmp/", "usr/", "usr/local/", "usr/local/bin/"} {
			mode := int64(0o755)
			if d == "tmp/" {
				mode = 0o1777
			}
			if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: mode, ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
		}
		if err := file(tw, "bin/busybox", bb, 0o755); err != nil {
			return err
		}
		for _, a := range busyboxApplets {
			if err := tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	l2, err := layer(func(tw *tar.Writer) error {
		return file(tw, "usr/local/bin/fakeserver", fs, 0o755)
	})
	if err != nil {
		return nil, err
	}
	files, err := imagetest.ShapeFiles(Shape)
	if err != nil {
		return nil, err
	}
	l3, err := layer(func(tw *tar.Writer) error {
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		sort.Strings(names)
		dirs := map[string]bool{}
		for _, n := range names {
			p := imagetest.SitePackages + "/" + n
			for d := filepath.Dir(p); d != "." && !dirs[d]; d = filepath.Dir(d) {
				dirs[d] = true
			}
		}
		var ds []string
		for d := range dirs {
			ds = append(ds, d)
		}
		sort.Strings(ds)
		for _, d := range ds {
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
		}
		for _, n := range names {
			if err := file(tw, imagetest.SitePackages+"/"+n, []byte(files[n]), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, l1, l2, l3)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"SMPATCH_REPO=/" + imagetest.SitePackages,
	}
	cf.Config.Cmd = []string{"fakeserver"}
	cf.History = []v1.History{
		{Created: cf.Created, CreatedBy: "busybox-static rootfs"},
		{Created: cf.Created, CreatedBy: "the fake sglang server"},
		{Created: cf.Created, CreatedBy: "synthetic sglang installed (shape " + Shape + ")"},
	}
	return mutate.ConfigFile(img, cf)
}

// WriteLayout writes the base as an OCI layout in dir (created) and
// returns its manifest digest.
func WriteLayout(dir, busybox, fakeServer string) (v1.Hash, error) {
	img, err := Image(busybox, fakeServer)
	if err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendImage(img); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// static refuses a dynamically linked binary: the image has no libc.
func static(path string, data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: not an ELF binary: %w", path, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the image needs a static one (apt-get install busybox-static)", path)
		}
	}
	return nil
}

func file(tw *tar.Writer, name string, data []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func layer(write func(*tar.Writer) error) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := write(tw); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
}

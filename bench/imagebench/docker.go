package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// save writes the one image of an OCI layout as a docker-save tarball.
func save(args []string) error {
	fl := flag.NewFlagSet("save", flag.ExitOnError)
	dir := fl.String("layout", "", "OCI layout holding one image")
	tag := fl.String("tag", "", "the tarball's REPO:TAG")
	out := fl.String("out", "", "tarball to write")
	_ = fl.Parse(args)
	if *dir == "" || *tag == "" || *out == "" {
		usage()
	}
	img, err := onlyImage(*dir)
	if err != nil {
		return err
	}
	t, err := name.NewTag(*tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(*out, t, img)
}

func onlyImage(dir string) (v1.Image, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(im.Manifests) != 1 {
		return nil, fmt.Errorf("%s: %d images, want 1", dir, len(im.Manifests))
	}
	return p.Image(im.Manifests[0].Digest)
}

// refImage reads "oci:DIR@sha256:..." (a refs.json value): the image and
// its config.
func refImage(ref string) (v1.Image, *v1.ConfigFile, error) {
	dir, dig, ok := strings.Cut(strings.TrimPrefix(ref, "oci:"), "@")
	if !ok || !strings.HasPrefix(ref, "oci:") {
		return nil, nil, fmt.Errorf("%s: not oci:DIR@DIGEST", ref)
	}
	h, err := v1.NewHash(dig)
	if err != nil {
		return nil, nil, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, err
	}
	img, err := p.Image(h)
	if err != nil {
		return nil, nil, err
	}
	cf, err := img.ConfigFile()
	return img, cf, err
}

// dockerfiles writes, for each cell of a refs file, a build context
// CTX/CELL holding rootfs/ (the regular files of the layer smpatch put on
// top of the base, read back from the built image) and a Dockerfile that
// copies them onto FROM and sets the env and labels the cell's config adds
// to the base's. It prints the cell names, one a line.
func dockerfiles(args []string) error {
	fl := flag.NewFlagSet("dockerfiles", flag.ExitOnError)
	refs := fl.String("refs", "", "refs.json of a matrix build")
	base := fl.String("base", "", "the base's OCI layout")
	from := fl.String("from", "", "the base's tag in the daemon")
	ctx := fl.String("ctx", "", "directory for the contexts (created)")
	_ = fl.Parse(args)
	if *refs == "" || *base == "" || *from == "" || *ctx == "" {
		usage()
	}
	cells, err := readRefs(*refs)
	if err != nil {
		return err
	}
	bimg, err := onlyImage(*base)
	if err != nil {
		return err
	}
	bcf, err := bimg.ConfigFile()
	if err != nil {
		return err
	}
	names := make([]string, 0, len(cells))
	for c := range cells {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		if err := dockerfile(cells[c], bcf, *from, filepath.Join(*ctx, c)); err != nil {
			return fmt.Errorf("cell %s: %w", c, err)
		}
		fmt.Println(c)
	}
	return nil
}

func readRefs(file string) (map[string]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	cells := map[string]string{}
	if err := json.Unmarshal(b, &cells); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cells, nil
}

func dockerfile(ref string, base *v1.ConfigFile, from, dir string) error {
	img, cf, err := refImage(ref)
	if err != nil {
		return err
	}
	if n := len(cf.History); n == 0 || cf.History[n-1].Comment != "smpatch" {
		return errors.New("its top layer was not written by smpatch")
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	var whiteouts []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		clean := path.Clean(h.Name)
		if strings.HasPrefix(clean, "../") || path.IsAbs(clean) {
			return fmt.Errorf("%s: entry outside the root", h.Name)
		}
		dst := filepath.Join(dir, "rootfs", filepath.FromSlash(clean))
		switch b := path.Base(clean); {
		case b == ".wh..wh..opq":
			return fmt.Errorf("%s: an opaque directory has no Dockerfile instruction", h.Name)
		case strings.HasPrefix(b, ".wh."):
			if strings.ContainsAny(clean, "'\\") {
				return fmt.Errorf("%s: a quote or backslash in a removed path", h.Name)
			}
			whiteouts = append(whiteouts, "/"+path.Join(path.Dir(clean), strings.TrimPrefix(b, ".wh.")))
		case h.Typeflag == tar.TypeDir:
			if err := os.MkdirAll(dst, os.FileMode(h.Mode).Perm()); err != nil {
				return err
			}
		case h.Typeflag == tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, os.FileMode(h.Mode).Perm())
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: tar type %c not handled", h.Name, h.Typeflag)
		}
	}
	for _, kv := range append(append([]string(nil), cf.Config.Env...), labelPairs(cf.Config.Labels)...) {
		if strings.ContainsAny(kv, "\n\r") {
			return fmt.Errorf("%q: a line break has no Dockerfile spelling", kv)
		}
	}
	var df strings.Builder
	fmt.Fprintf(&df, "FROM %s\nCOPY rootfs/ /\n", from)
	baseEnv := map[string]bool{}
	for _, e := range base.Config.Env {
		baseEnv[e] = true
	}
	var env []string
	for _, e := range cf.Config.Env {
		if !baseEnv[e] {
			k, v, _ := strings.Cut(e, "=")
			env = append(env, k+"="+quote(v))
		}
	}
	if len(whiteouts) > 0 {
		// The base's shell removes what the layer whites out (stale bytecode).
		fmt.Fprintf(&df, "RUN rm -f '%s'\n", strings.Join(whiteouts, "' '"))
	}
	if len(env) > 0 {
		fmt.Fprintf(&df, "ENV %s\n", strings.Join(env, " "))
	}
	var labels []string
	for k, v := range cf.Config.Labels {
		if bv, ok := base.Config.Labels[k]; !ok || bv != v {
			labels = append(labels, quote(k)+"="+quote(v))
		}
	}
	sort.Strings(labels)
	if len(labels) > 0 {
		fmt.Fprintf(&df, "LABEL %s\n", strings.Join(labels, " "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "whiteouts"), []byte(strings.Join(append(whiteouts, ""), "\n")), 0o644)
}

// quote writes a Dockerfile ENV/LABEL value in double quotes, with the
// characters the parser would interpret escaped.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`)
	return `"` + r.Replace(s) + `"`
}

// same compares `docker inspect IMAGE` (on stdin, read to its end) with
// the image a refs file names for a cell: the same env and labels.
func same(args []string) error {
	if len(args) != 2 {
		usage()
	}
	cells, err := readRefs(args[0])
	if err != nil {
		return err
	}
	ref, ok := cells[args[1]]
	if !ok {
		return fmt.Errorf("%s: no cell %s", args[0], args[1])
	}
	_, cf, err := refImage(ref)
	if err != nil {
		return err
	}
	var got []struct {
		Config struct {
			Env    []string
			Labels map[string]string
		}
	}
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(in, &got); err != nil {
		return fmt.Errorf("docker inspect: %w", err)
	}
	if len(got) != 1 {
		return fmt.Errorf("docker inspect: %d images, want 1", len(got))
	}
	if a, b := sorted(got[0].Config.Env), sorted(cf.Config.Env); !reflect.DeepEqual(a, b) {
		return fmt.Errorf("env differs: docker build %q, smpatch %q", a, b)
	}
	if !reflect.DeepEqual(got[0].Config.Labels, cf.Config.Labels) {
		return fmt.Errorf("labels differ: docker build %v, smpatch %v", got[0].Config.Labels, cf.Config.Labels)
	}
	return nil
}

func labelPairs(m map[string]string) []string {
	var s []string
	for k, v := range m {
		s = append(s, k+"="+v)
	}
	return s
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// addShell puts a static busybox at /bin/busybox, with /bin/sh and
// /bin/rm linked to it, in a layer on top of the one image of an OCI
// layout, so that a Dockerfile on that base can RUN a command. The
// base's blobs stay where they are; its index names the new image.
func addShell(dir, busybox string) (v1.Hash, error) {
	img, err := onlyImage(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return v1.Hash{}, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdrs := []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))},
		{Name: "bin/sh", Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777},
		{Name: "bin/rm", Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777},
	}
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			return v1.Hash{}, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bb); err != nil {
				return v1.Hash{}, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return v1.Hash{}, err
	}
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return v1.Hash{}, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: time.Unix(0, 0).UTC()}, CreatedBy: "install busybox"},
	})
	if err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.ReplaceImage(img, match.Name("base"), layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "base"})); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

package image

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/smpatch/smpatch/internal/testkit/imagetest"
	"github.com/smpatch/smpatch/internal/testkit/testsvc"
	"github.com/smpatch/smpatch/source"
)

// multiPlatform writes a layout holding one index of a linux/amd64 image
// (sglang 0.5.6) and a linux/arm64/v8 one (sglang 0.5.7): the version
// tells which was picked.
func multiPlatform(t *testing.T, nested bool) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "multi")
	_, err := imagetest.WriteIndex(dir, nested,
		imagetest.Options{RandomLayers: 1, RandomBytes: 4 << 10, Version: "0.5.6"},
		imagetest.Options{RandomLayers: 1, RandomBytes: 4 << 10, Version: "0.5.7", Seed: 2, Platform: "linux/arm64/v8"},
	)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func sglangVersion(t *testing.T, b *Base) string {
	t.Helper()
	tr, err := b.Tree(source.SGLang)
	if err != nil {
		t.Fatal(err)
	}
	v, _, err := tr.Version(context.Background())
	if err != nil || v == nil {
		t.Fatalf("version: %v %v", v, err)
	}
	return v.String()
}

func arm64(t *testing.T, s string) *v1.Platform {
	t.Helper()
	p, err := ParsePlatform(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLayoutPlatforms opens both shapes of a multi-platform OCI layout:
// index.json as the index (crane pull --format oci) and index.json naming
// the index (skopeo copy --all).
func TestLayoutPlatforms(t *testing.T) {
	ctx := context.Background()
	for _, nested := range []bool{false, true} {
		dir := multiPlatform(t, nested)
		b, err := OpenBase(ctx, "oci:"+dir, Remote{}, FSOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v := sglangVersion(t, b); v != "0.5.6" || b.Platform != "linux/amd64" || !b.PlatformDefault {
			t.Errorf("nested=%v, no platform: sglang %s, platform %q, default %v", nested, v, b.Platform, b.PlatformDefault)
		}
		for _, p := range []string{"linux/arm64", "linux/arm64/v8"} {
			b, err := OpenBase(ctx, "oci:"+dir, Remote{Platform: arm64(t, p)}, FSOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v := sglangVersion(t, b); v != "0.5.7" || b.Platform != p || b.PlatformDefault {
				t.Errorf("nested=%v, %s: sglang %s, platform %q, default %v", nested, p, v, b.Platform, b.PlatformDefault)
			}
		}
		_, err = OpenBase(ctx, "oci:"+dir, Remote{Platform: arm64(t, "linux/arm64/v9")}, FSOptions{})
		if err == nil || !strings.Contains(err.Error(), "no linux/arm64/v9 image in the index (it has linux/amd64, linux/arm64/v8)") {
			t.Errorf("nested=%v, a platform the index lacks: %v", nested, err)
		}
	}
}

// TestSinglePlatform checks a single image: taken as it is without
// --platform, refused when it is not of the platform asked for.
func TestSinglePlatform(t *testing.T) {
	ctx := context.Background()
	dir := writeBase(t, imagetest.Options{Platform: "linux/arm64"})
	b, err := OpenImage(ctx, "oci:"+dir, Remote{})
	if err != nil || b.Platform != "linux/arm64" || b.PlatformDefault {
		t.Fatalf("single arm64 image: %+v, %v", b, err)
	}
	if _, err := OpenImage(ctx, "oci:"+dir, Remote{Platform: arm64(t, "linux/arm64")}); err != nil {
		t.Error(err)
	}
	_, err = OpenImage(ctx, "oci:"+dir, Remote{Platform: arm64(t, "linux/amd64")})
	if err == nil || !strings.Contains(err.Error(), "the image is linux/arm64, not linux/amd64 (--platform)") {
		t.Errorf("wrong platform: %v", err)
	}
}

// pushIndex pushes the multi-platform index of a layout to ref.
func pushIndex(t *testing.T, dir, ref string, rem Remote) {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	ii, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	child, err := ii.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, child, rem.options(context.Background())...); err != nil {
		t.Fatal(err)
	}
}

func checkRegistryPlatforms(t *testing.T, ref string, rem Remote) {
	t.Helper()
	ctx := context.Background()
	b, err := OpenBase(ctx, ref, rem, FSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := sglangVersion(t, b); v != "0.5.6" || b.Platform != "linux/amd64" || !b.PlatformDefault {
		t.Errorf("no platform: sglang %s, platform %q, default %v", v, b.Platform, b.PlatformDefault)
	}
	rem.Platform = arm64(t, "linux/arm64")
	b, err = OpenBase(ctx, ref, rem, FSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := sglangVersion(t, b); v != "0.5.7" || b.Platform != "linux/arm64" || b.PlatformDefault {
		t.Errorf("linux/arm64: sglang %s, platform %q, default %v", v, b.Platform, b.PlatformDefault)
	}
	rem.Platform = arm64(t, "linux/ppc64le")
	if _, err := OpenBase(ctx, ref, rem, FSOptions{}); err == nil || !strings.Contains(err.Error(), "no linux/ppc64le image in the index") {
		t.Errorf("a platform the index lacks: %v", err)
	}
}

// TestRegistryPlatforms resolves a registry's multi-platform index
// through remote.WithPlatform, on go-containerregistry's registry.
func TestRegistryPlatforms(t *testing.T) {
	host := testRegistry(t, nil)
	ref := host + "/lmsysorg/sglang:multi"
	pushIndex(t, multiPlatform(t, true), ref, fast)
	checkRegistryPlatforms(t, ref, fast)
}

// TestRealRegistryPlatforms is TestRegistryPlatforms against the
// distribution registry of scripts/services.sh.
func TestRealRegistryPlatforms(t *testing.T) {
	reg := testsvc.Registry(t)
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	ref := reg + "/smpatch-image-test/multi:" + strings.ReplaceAll(t.Name(), "/", "-")
	rem := Remote{Transport: NewTransport(DefaultTimeout)}
	pushIndex(t, multiPlatform(t, true), ref, rem)
	checkRegistryPlatforms(t, ref, rem)
}

func TestParsePlatform(t *testing.T) {
	for in, want := range map[string]string{
		"linux/amd64":    "linux/amd64",
		"linux/arm64/v8": "linux/arm64/v8",
		"linux":          "",
		"linux/":         "",
		"/amd64":         "",
		"linux/arm64/":   "",
		"a/b/c/d":        "",
		"Linux/AMD64":    "",
		"linux/amd64:10": "",
		"linux/am d64":   "",
	} {
		p, err := ParsePlatform(in)
		switch {
		case want == "" && err == nil:
			t.Errorf("ParsePlatform(%q) = %v, want an error", in, p)
		case want != "" && (err != nil || p.String() != want):
			t.Errorf("ParsePlatform(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
}

func FuzzParsePlatform(f *testing.F) {
	for _, s := range []string{"linux/amd64", "linux/arm64/v8", "windows/amd64:10.0", "/", "a//b", "linux/arm64/v8/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePlatform(s)
		if err != nil {
			return
		}
		// What it accepts reads back as written, and is what
		// go-containerregistry parses it to.
		if p.String() != s {
			t.Fatalf("%q reads back as %q", s, p.String())
		}
		q, err := v1.ParsePlatform(s)
		if err != nil || !q.Equals(*p) {
			t.Fatalf("%q: go-containerregistry reads %+v, %v; ParsePlatform %+v", s, q, err, p)
		}
	})
}

package image

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/smpatch/smpatch/internal/testkit/imagetest"
)

// testRegistry is go-containerregistry's in-memory registry on httptest.
func testRegistry(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials from the host
	return strings.TrimPrefix(s.URL, "http://")
}

var fast = Remote{Retries: &remote.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1}}

func TestLayoutDestination(t *testing.T) {
	base := writeBase(t, imagetest.Options{})
	o := openBase(t, "oci:"+base)
	b := buildOne(t, o, "fewchan", map[string]string{"NCCL_DEBUG": "INFO"})
	out := filepath.Join(t.TempDir(), "out")
	dst := &Layout{Dir: out, LinkFrom: base}
	ctx := context.Background()
	if _, ok, err := dst.Has(ctx, "fewchan", b.Digest); ok || err != nil {
		t.Fatalf("Has before Put = %v, %v", ok, err)
	}
	ref, err := dst.Put(ctx, "fewchan", b.Image)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(ref, "@"+b.Digest.String()) || !strings.HasPrefix(ref, "oci:/") {
		t.Errorf("ref = %s", ref)
	}
	if r2, ok, err := dst.Has(ctx, "fewchan", b.Digest); !ok || err != nil || r2 != ref {
		t.Errorf("Has after Put = %s, %v, %v", r2, ok, err)
	}
	// Base layers are hard links of the base's blobs, not copies.
	m, _ := o.img.Manifest()
	for _, l := range m.Layers {
		a, err1 := os.Stat(filepath.Join(base, "blobs/sha256", l.Digest.Hex))
		c, err2 := os.Stat(filepath.Join(out, "blobs/sha256", l.Digest.Hex))
		if err1 != nil || err2 != nil || !os.SameFile(a, c) {
			t.Errorf("layer %s not linked: %v %v", l.Digest, err1, err2)
		}
	}
	// A second image under another name; the same name is replaced.
	b2 := buildOne(t, o, "defaults", nil)
	if _, err := dst.Put(ctx, "defaults", b2.Image); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Put(ctx, "fewchan", b.Image); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fewchan", "defaults"} {
		back := openBase(t, "oci:"+out+":"+name)
		d, _ := back.img.Digest()
		want := map[string]string{"fewchan": b.Digest.String(), "defaults": b2.Digest.String()}[name]
		if d.String() != want {
			t.Errorf("%s: digest %s, want %s", name, d, want)
		}
	}
	if _, err := Open(ctx, &Ref{Raw: "oci:" + out, Kind: "layout", Dir: out}, Remote{}); err == nil || !strings.Contains(err.Error(), "holds 2 images") {
		t.Errorf("ambiguous layout error = %v", err)
	}
	// By digest, as the refs file names it.
	r, err := ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	if img, err := Open(ctx, r, Remote{}); err != nil {
		t.Error(err)
	} else if d, _ := img.Digest(); d != b.Digest {
		t.Errorf("by digest: %s", d)
	}
}

func TestRegistryPushPull(t *testing.T) {
	host := testRegistry(t, nil)
	ctx := context.Background()
	// The base comes from the registry too.
	base := openBase(t, "oci:"+writeBase(t, imagetest.Options{}))
	baseRef := host + "/lmsysorg/sglang:v0.5.6"
	bdst, tag, err := ParseDestination(baseRef, fast)
	if err != nil || tag != "v0.5.6" {
		t.Fatalf("ParseDestination = %v, %q, %v", bdst, tag, err)
	}
	if _, err := bdst.Put(ctx, tag, base.img); err != nil {
		t.Fatal(err)
	}
	o := openBase(t, baseRef)
	if o.tree == nil {
		t.Fatal("sglang not found in the pulled base")
	}
	b := buildOne(t, o, "fewchan", map[string]string{"NCCL_DEBUG": "INFO"})
	dst := &Registry{Repo: bdst.(*Registry).Repo, Remote: fast}
	if _, ok, err := dst.Has(ctx, "fewchan", b.Digest); ok || err != nil {
		t.Fatalf("Has before push = %v, %v", ok, err)
	}
	ref, err := dst.Put(ctx, "fewchan", b.Image)
	if err != nil {
		t.Fatal(err)
	}
	if ref != host+"/lmsysorg/sglang@"+b.Digest.String() {
		t.Errorf("ref = %s", ref)
	}
	if _, ok, err := dst.Has(ctx, "fewchan", b.Digest); !ok || err != nil {
		t.Errorf("Has after push = %v, %v", ok, err)
	}
	back := openBase(t, ref)
	got, err := back.fs.ReadFile(sp + "/sglang/srt/layers/communicator.py")
	if err != nil || string(got) != patchedCommunicator() {
		t.Errorf("pulled file = %q, %v", got, err)
	}
	// The same build from the pulled base has the same digest as from the layout.
	fromLayout := buildOne(t, base, "fewchan", map[string]string{"NCCL_DEBUG": "INFO"})
	if fromLayout.Digest == b.Digest {
		// The base ref is recorded, so they differ; the layers must not.
		t.Error("base reference not recorded")
	}
}

func TestRegistryErrors(t *testing.T) {
	ctx := context.Background()
	o := openBase(t, "oci:"+writeBase(t, imagetest.Options{}))
	b := buildOne(t, o, "fewchan", nil)

	// A closed port on 127.0.0.1.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	r, err := ParseRef(closed + "/x/base:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, r, fast); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("pull from closed port: %v", err)
	}
	dst, _, err := ParseDestination(closed+"/x/out", fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Put(ctx, "fewchan", b.Image); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("push to closed port: %v", err)
	}

	// A registry that demands credentials nobody has.
	host := testRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, _, ok := r.BasicAuth(); !ok {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	dst, _, err = ParseDestination(host+"/x/out", fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Put(ctx, "fewchan", b.Image); err == nil || !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
		t.Errorf("unauthorised push: %v", err)
	}
	if _, _, err := dst.Has(ctx, "fewchan", b.Digest); err == nil {
		t.Error("unauthorised lookup succeeded")
	}
}

func TestParseRef(t *testing.T) {
	dir := t.TempDir()
	tarPath := filepath.Join(dir, "base.tar")
	if err := os.WriteFile(tarPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in, kind, dir, name, digest, err string
	}{
		{in: "oci:/x/layout", kind: "layout", dir: "/x/layout"},
		{in: "oci:/x/layout:cell-a", kind: "layout", dir: "/x/layout", name: "cell-a"},
		{in: "oci:rel/dir@sha256:" + strings.Repeat("a", 64), kind: "layout", dir: "rel/dir", digest: "sha256:" + strings.Repeat("a", 64)},
		{in: "oci:/x@sha256:zz", err: "bad digest"},
		{in: "oci:", err: "no layout directory"},
		{in: tarPath, kind: "tarball"},
		{in: "/no/such.tar", err: "no such file"},
		{in: "lmsysorg/sglang:v0.5.9-cu129", kind: "registry"},
		{in: "localhost:5000/a/b@sha256:" + strings.Repeat("b", 64), kind: "registry"},
		{in: "Bad Ref", err: "not an image reference"},
		{in: "", err: "empty"},
	} {
		r, err := ParseRef(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRef(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRef(%q): %v", tc.in, err)
			continue
		}
		if r.Kind != tc.kind || r.Dir != tc.dir || r.RefName != tc.name || r.Digest != tc.digest {
			t.Errorf("ParseRef(%q) = %+v", tc.in, r)
		}
	}
}

func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"oci:/a", "oci:/a:b", "oci:a@sha256:" + strings.Repeat("0", 64), "reg.io/a/b:c", "a@sha256:x", ":::", "oci::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRef(s)
		if err == nil && r.Raw != s {
			t.Errorf("Raw = %q", r.Raw)
		}
		if err == nil && r.Kind == "layout" && r.Dir == "" {
			t.Errorf("layout without a directory: %q", s)
		}
	})
}

// TestLayoutRefusesForeign checks that a layout smpatch did not write (a
// user's, with an index.json) is never changed, and that a Put that fails
// leaves nothing behind: no new directory, no added blobs, the index as it
// was.
func TestLayoutRefusesForeign(t *testing.T) {
	base := writeBase(t, imagetest.Options{})
	o := openBase(t, "oci:"+base)
	b := buildOne(t, o, "c", nil)
	ctx := context.Background()
	before, _ := os.ReadFile(filepath.Join(base, "index.json"))
	_, err := (&Layout{Dir: base}).Put(ctx, "c", b.Image)
	if !errors.Is(err, ErrNotOurs) || !strings.Contains(err.Error(), base) {
		t.Fatalf("Put into a foreign layout: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(base, "index.json")); string(after) != string(before) {
		t.Error("a foreign index.json changed")
	}

	// A failing Put: the base's project layer is corrupt, so copying it
	// (no hard link: LinkFrom is unset) fails verification.
	m, _ := o.img.Manifest()
	bad := m.Layers[len(m.Layers)-2].Digest
	p := filepath.Join(base, "blobs", bad.Algorithm, bad.Hex)
	data, _ := os.ReadFile(p)
	data[len(data)-6] ^= 1
	os.WriteFile(p, data, 0o644)
	out := filepath.Join(t.TempDir(), "new")
	if _, err := (&Layout{Dir: out}).Put(ctx, "c", b.Image); err == nil || !errors.Is(err, ErrDigest) {
		t.Fatalf("Put of a corrupt base layer: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed Put left %s: %v", out, err)
	}
	// Into an existing layout of ours: the failed Put adds no blob and
	// keeps the index.
	ours := filepath.Join(t.TempDir(), "ours")
	b2 := buildOne(t, openBase(t, "oci:"+writeBase(t, imagetest.Options{Seed: 7, Version: "0.5.7"})), "d", nil)
	if _, err := (&Layout{Dir: ours}).Put(ctx, "d", b2.Image); err != nil {
		t.Fatal(err)
	}
	idx, _ := os.ReadFile(filepath.Join(ours, "index.json"))
	blobs, _ := os.ReadDir(filepath.Join(ours, "blobs", "sha256"))
	if _, err := (&Layout{Dir: ours}).Put(ctx, "c", b.Image); err == nil {
		t.Fatal("Put of a corrupt base layer succeeded")
	}
	if now, _ := os.ReadFile(filepath.Join(ours, "index.json")); string(now) != string(idx) {
		t.Error("a failed Put changed index.json")
	}
	if now, _ := os.ReadDir(filepath.Join(ours, "blobs", "sha256")); len(now) != len(blobs) {
		t.Errorf("a failed Put left blobs: %d before, %d after", len(blobs), len(now))
	}
}

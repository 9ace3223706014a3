package image

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestParseArchive(t *testing.T) {
	for _, tc := range []struct {
		in, path, repo, tag, err string
	}{
		{in: "docker-archive:out.tar", path: "out.tar", repo: "smpatch"},
		{in: "docker-archive:a/b.tar:smpatch/story", path: "a/b.tar", repo: "smpatch/story"},
		{in: "docker-archive:b.tar:smpatch/story:fusion", path: "b.tar", repo: "smpatch/story", tag: "fusion"},
		{in: "docker-archive:b.tar:127.0.0.1:5000/x", path: "b.tar", repo: "127.0.0.1:5000/x"},
		{in: "docker-archive:b.tar:127.0.0.1:5000/x:v1", path: "b.tar", repo: "127.0.0.1:5000/x", tag: "v1"},
		{in: "docker-archive:", err: "name a file"},
		{in: "docker-archive:b.tar:Bad/Repo", err: "not a repository name"},
		{in: "docker-archive:b.tar:x:bad tag", err: "not a tag"},
	} {
		d, tag, err := ParseDestination(tc.in, Remote{})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		a, ok := d.(*Archive)
		if !ok || a.Path != tc.path || a.Repo != tc.repo || tag != tc.tag {
			t.Errorf("%s: %#v tag %q", tc.in, d, tag)
		}
	}
}

// Every image put in a batch lands in one docker-save tarball, each under
// its tag, and reads back with the same digest.
func TestArchiveBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "out.tar")
	a := &Archive{Path: path, Repo: "smpatch/test"}
	a.Begin()
	ctx := context.Background()
	want := map[string]string{}
	for _, n := range []string{"one", "two"} {
		img, err := random.Image(256, 2)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := a.Put(ctx, n, img)
		if err != nil {
			t.Fatal(err)
		}
		if ref != "smpatch/test:"+n {
			t.Errorf("ref %q", ref)
		}
		d, _ := img.Digest()
		want[n] = d.String()
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("written before Flush")
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	for n, d := range want {
		tag, _ := name.NewTag("smpatch/test:" + n)
		img, err := tarball.ImageFromPath(path, &tag)
		if err != nil {
			t.Fatal(err)
		}
		got, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		// docker save stores layers as they are: the manifest is rebuilt
		// from the same blobs, so the digest is the same.
		if got.String() != d {
			t.Errorf("%s: digest %s, want %s", n, got, d)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("left beside the archive: %v", entries)
	}
}

func FuzzParseDestination(f *testing.F) {
	for _, s := range []string{"docker-archive:x.tar", "docker-archive:x.tar:a/b:c", "docker-archive::", "oci:dir:name", "reg:5000/a:b", "docker-archive:a:b:c:d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, tag, err := ParseDestination(s, Remote{})
		if err != nil {
			return
		}
		if a, ok := d.(*Archive); ok {
			if a.Path == "" {
				t.Fatalf("%q: archive without a path", s)
			}
			if _, err := name.NewRepository(a.Repo); err != nil {
				t.Fatalf("%q: repo %q: %v", s, a.Repo, err)
			}
			if tag != "" {
				if _, err := name.NewTag(a.Repo + ":" + tag); err != nil {
					t.Fatalf("%q: tag %q: %v", s, tag, err)
				}
			}
		}
	})
}

package main

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/smpatch/smpatch/internal/testkit/imagetest"
)

// TestImageScripts runs the image stories in testdata/image. Their setup
// writes synthetic base images (OCI layouts and a docker-save tarball) into
// $WORK/bases and starts registries on httptest: $REGISTRY (open),
// $AUTHREG (demands credentials nobody has) and $CLOSED (a closed port).
func TestImageScripts(t *testing.T) {
	testscript.Run(t, scriptParams("testdata/image", imageScriptSetup))
}

func imageScriptSetup(e *testscript.Env) error {
	e.Setenv("DOCKER_CONFIG", e.WorkDir+"/.docker")
	e.Setenv("SOURCE_DATE_EPOCH", "")
	bases := filepath.Join(e.WorkDir, "bases")
	fi, err := flashinferFixture("../../probe/testdata/wheel-gate-9-10.txtar")
	if err != nil {
		return err
	}
	for dir, o := range map[string]imagetest.Options{
		"c5":      {Shape: "c5-s5"},
		"c5fi":    {Shape: "c5-s5", Extra: fi},
		"c2":      {Shape: "c2"},
		"applied": {Shape: "c5-s5-applied"},
		"empty":   {NoProject: true},
	} {
		o.RandomLayers, o.RandomBytes = 2, 16<<10
		if _, err := imagetest.Write(filepath.Join(bases, dir), o); err != nil {
			return err
		}
	}
	p, err := layout.FromPath(filepath.Join(bases, "c5"))
	if err != nil {
		return err
	}
	ii, err := p.ImageIndex()
	if err != nil {
		return err
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return err
	}
	img, err := ii.Image(im.Manifests[0].Digest)
	if err != nil {
		return err
	}
	tag, _ := name.NewTag("lmsysorg/sglang:v0.5.17")
	if err := tarball.WriteToFile(filepath.Join(bases, "c5.tar"), tag, img); err != nil {
		return err
	}

	// A multi-platform index: linux/amd64 and linux/arm64 images of the
	// C5 shape, as an OCI layout (index.json naming the index).
	if _, err := imagetest.WriteIndex(filepath.Join(bases, "multi"), true,
		imagetest.Options{Shape: "c5-s5", RandomLayers: 1, RandomBytes: 16 << 10},
		imagetest.Options{Shape: "c5-s5", RandomLayers: 1, RandomBytes: 16 << 10, Seed: 2, Platform: "linux/arm64"},
	); err != nil {
		return err
	}

	quiet := registry.Logger(log.New(io.Discard, "", 0))
	open := httptest.NewServer(registry.New(quiet))
	e.Defer(open.Close)
	e.Setenv("REGISTRY", strings.TrimPrefix(open.URL, "http://"))
	if err := pushIndex(filepath.Join(bases, "multi"), strings.TrimPrefix(open.URL, "http://")+"/multi/sglang:v0.5.17"); err != nil {
		return err
	}
	silent, err := neverAnswers(e)
	if err != nil {
		return err
	}
	e.Setenv("SILENT", silent)
	reg := registry.New(quiet)
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := r.BasicAuth(); !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="smpatch-test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	e.Defer(auth.Close)
	e.Setenv("AUTHREG", strings.TrimPrefix(auth.URL, "http://"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	e.Setenv("CLOSED", l.Addr().String())
	return l.Close()
}

// pushIndex pushes the index that the OCI layout dir's index.json names
// to ref.
func pushIndex(dir, ref string) error {
	p, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	ii, err := p.ImageIndex()
	if err != nil {
		return err
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return err
	}
	child, err := ii.ImageIndex(im.Manifests[0].Digest)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	return remote.WriteIndex(tag, child)
}

// neverAnswers listens on a port of 127.0.0.1 and holds every connection
// open without a byte: a registry that accepts TCP and never answers.
func neverAnswers(e *testscript.Env) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	e.Defer(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String(), nil
}

// flashinferFixture reads one of the probe's installed-flashinfer fixtures
// and places its site-packages files in the synthetic base's.
func flashinferFixture(file string) (map[string]string, error) {
	a, err := txtar.ParseFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, f := range a.Files {
		if rest, ok := strings.CutPrefix(f.Name, "lib/python3.12/site-packages/"); ok {
			out[imagetest.SitePackages+"/"+rest] = string(f.Data)
		}
	}
	return out, nil
}

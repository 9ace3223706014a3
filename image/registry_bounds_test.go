package image

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/smpatch/smpatch/internal/testkit/imagetest"
)

// A registry's manifest claiming a config of gigabytes, or more layers
// than smpatch reads, is refused before the config or any layer is asked
// for: the bound holds for registries as for OCI layouts (TestBounds).
func TestRegistryClaimsBounded(t *testing.T) {
	var edit func(m *v1.Manifest)
	var blobs atomic.Int32
	host := testRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") && edit != nil {
				blobs.Add(1)
			}
			if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/manifests/") || edit == nil {
				h.ServeHTTP(w, r)
				return
			}
			rec := &recorder{header: http.Header{}}
			h.ServeHTTP(rec, r)
			var m v1.Manifest
			if err := json.Unmarshal(rec.body, &m); err != nil {
				t.Errorf("manifest: %v", err)
			}
			edit(&m)
			b, _ := json.Marshal(m)
			w.Header().Set("Content-Type", rec.header.Get("Content-Type"))
			w.Write(b)
		})
	})
	ref := pushBase(t, host, 1024)
	for name, tc := range map[string]struct {
		edit func(m *v1.Manifest)
		want string
	}{
		"8 GiB config": {func(m *v1.Manifest) { m.Config.Size = 8 << 30 }, "8589934592 bytes"},
		"300 layers": {func(m *v1.Manifest) {
			for len(m.Layers) < 300 {
				m.Layers = append(m.Layers, m.Layers[0])
			}
		}, "300 layers"},
	} {
		edit = tc.edit
		blobs.Store(0)
		_, err := OpenBase(context.Background(), ref, fast, FSOptions{})
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", name, err)
		}
		if n := blobs.Load(); n != 0 {
			t.Errorf("%s: %d blobs asked for before the refusal", name, n)
		}
	}
}

// A push to a registry that accepts the connection and never answers
// fails once the timeout passes, instead of hanging.
func TestPushToRegistryThatNeverAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	o := openBase(t, "oci:"+writeBase(t, imagetest.Options{}))
	rem := fast
	rem.Transport = NewTransport(200 * time.Millisecond)
	dst, tag, err := ParseDestination(l.Addr().String()+"/x/y:1", rem)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := dst.Put(context.Background(), tag, o.img); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("a push to a registry that never answers: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}

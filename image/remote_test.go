package image

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/smpatch/smpatch/internal/testkit/imagetest"
)

// A registry that accepts the connection and never answers fails the
// request once the timeout passes, instead of hanging.
func TestRegistryNeverAnswers(t *testing.T) {
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
			defer c.Close() // held open, never answered
		}
	}()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	r, err := ParseRef(l.Addr().String() + "/x/base:1")
	if err != nil {
		t.Fatal(err)
	}
	rem := fast
	rem.Transport = NewTransport(200 * time.Millisecond)
	start := time.Now()
	_, err = Open(context.Background(), r, rem)
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("a registry that never answers: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

// registryWithBlobs serves pushed images, and blob downloads through
// serve (the blob's handler, the request).
func registryWithBlobs(t *testing.T, serve func(h http.Handler, w http.ResponseWriter, r *http.Request)) string {
	t.Helper()
	return testRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/sha256:") {
				serve(h, w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
}

// pushBase pushes a synthetic base with a layer of n random bytes.
func pushBase(t *testing.T, host string, n int64) string {
	t.Helper()
	o := openBase(t, "oci:"+writeBase(t, imagetest.Options{RandomLayers: 1, RandomBytes: n}))
	ref := host + "/lmsysorg/sglang:v1"
	dst, tag, err := ParseDestination(ref, fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Put(context.Background(), tag, o.img); err != nil {
		t.Fatal(err)
	}
	return ref
}

// trickle writes the blob's first bytes, then one KiB every step until the
// client goes or the test ends (step 0: nothing more, ever).
type trickle struct {
	step time.Duration
	done chan struct{} // closed when the test ends
}

func newTrickle(t *testing.T, step time.Duration) trickle {
	tr := trickle{step: step, done: make(chan struct{})}
	t.Cleanup(func() { close(tr.done) })
	return tr
}

func (tr trickle) serve(h http.Handler, w http.ResponseWriter, r *http.Request) {
	rec := &recorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.code)
	b := rec.body
	n := min(len(b), 1024)
	w.Write(b[:n])
	w.(http.Flusher).Flush()
	for b = b[n:]; len(b) > 0; {
		wait := time.After(tr.step)
		if tr.step == 0 {
			wait = nil
		}
		select {
		case <-r.Context().Done():
			return
		case <-tr.done:
			return
		case <-wait:
		}
		n := min(len(b), 1024)
		if _, err := w.Write(b[:n]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		b = b[n:]
	}
}

type recorder struct {
	header http.Header
	code   int
	body   []byte
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(c int)           { r.code = c }
func (r *recorder) Write(b []byte) (int, error) { r.body = append(r.body, b...); return len(b), nil }

// A registry that stops sending in the middle of a layer fails the read
// once nothing came for the timeout.
func TestRegistryStallsInABlob(t *testing.T) {
	var stall bool
	tr := newTrickle(t, 0)
	host := registryWithBlobs(t, func(h http.Handler, w http.ResponseWriter, r *http.Request) {
		if !stall {
			h.ServeHTTP(w, r)
			return
		}
		tr.serve(h, w, r)
	})
	ref := pushBase(t, host, 256<<10)
	stall = true
	rem := fast
	rem.Transport = NewTransport(300 * time.Millisecond)
	start := time.Now()
	_, err := OpenBase(context.Background(), ref, rem, FSOptions{})
	if err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("a stalled blob: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
}

// A signal (the context done) stops indexing a base that streams slowly
// within a second.
func TestIndexCancelled(t *testing.T) {
	var slow bool
	tr := newTrickle(t, 20*time.Millisecond)
	host := registryWithBlobs(t, func(h http.Handler, w http.ResponseWriter, r *http.Request) {
		if !slow {
			h.ServeHTTP(w, r)
			return
		}
		tr.serve(h, w, r)
	})
	ref := pushBase(t, host, 4<<20)
	slow = true
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan time.Time, 1)
	time.AfterFunc(300*time.Millisecond, func() { cancelled <- time.Now(); cancel() })
	rem := fast
	rem.Transport = NewTransport(DefaultTimeout)
	_, err := OpenBase(ctx, ref, rem, FSOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled index: %v", err)
	}
	select {
	case at := <-cancelled:
		if d := time.Since(at); d > time.Second {
			t.Errorf("stopped %s after the cancel", d)
		}
	default:
		t.Fatal("OpenBase returned before the cancel: the base did not stream slowly")
	}
}

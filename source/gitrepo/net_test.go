package gitrepo

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// A server that accepts TCP connections and never answers: the fetch gives
// up after the silence allowed and names the host.
func TestFetchSilentServerTimesOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	SetNetTimeout(300 * time.Millisecond)
	t.Cleanup(func() { SetNetTimeout(0) })

	host := ln.Addr().String()
	for _, url := range []string{"http://" + host + "/sglang.git", "https://" + host + "/sglang.git"} {
		c := &RepoCache{Dir: t.TempDir()}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		_, err := c.Open(ctx, url)
		ctxErr := ctx.Err()
		cancel()
		if err == nil {
			t.Fatalf("%s: open succeeded", url)
		}
		if ctxErr != nil || time.Since(start) > 20*time.Second {
			t.Fatalf("%s: no timeout of its own (%v after %s)", url, err, time.Since(start))
		}
		want := host + " did not answer within 300ms"
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), url) {
			t.Errorf("%s: err = %v, want one naming the URL and %q", url, err, want)
		}
	}
}

func TestNetTimeoutFromEnv(t *testing.T) {
	t.Cleanup(func() { SetNetTimeout(0) })
	t.Setenv("SMPATCH_NET_TIMEOUT", "2m")
	if err := NetTimeoutFromEnv(); err != nil || NetTimeout() != 2*time.Minute {
		t.Fatalf("%v %s", err, NetTimeout())
	}
	t.Setenv("SMPATCH_NET_TIMEOUT", "soon")
	if err := NetTimeoutFromEnv(); err == nil || !strings.Contains(err.Error(), "SMPATCH_NET_TIMEOUT") {
		t.Fatalf("bad value: %v", err)
	}
}

package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	gossh "golang.org/x/crypto/ssh"
)

// DefaultNetTimeout is how long a remote may stay silent (to connect, to
// answer a request, between two reads of a transfer) before a fetch gives
// up; $SMPATCH_NET_TIMEOUT (a Go duration such as 30s or 2m) overrides it.
// A transfer that keeps moving is never cut, whatever its length, up to
// maxFetchTime.
const DefaultNetTimeout = 60 * time.Second

// maxFetchTime bounds one whole fetch.
const maxFetchTime = 2 * time.Hour

// netTimeout is the silence allowed, read by the transports at each dial.
var netTimeout atomic.Int64

func init() { netTimeout.Store(int64(DefaultNetTimeout)) }

// NetTimeout is the silence allowed now.
func NetTimeout() time.Duration { return time.Duration(netTimeout.Load()) }

// SetNetTimeout changes the silence allowed (d <= 0: the default).
func SetNetTimeout(d time.Duration) {
	if d <= 0 {
		d = DefaultNetTimeout
	}
	netTimeout.Store(int64(d))
}

// NetTimeoutFromEnv reads $SMPATCH_NET_TIMEOUT.
func NetTimeoutFromEnv() error {
	s := os.Getenv("SMPATCH_NET_TIMEOUT")
	if s == "" {
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("SMPATCH_NET_TIMEOUT=%q: want a positive duration such as 30s or 2m", s)
	}
	SetNetTimeout(d)
	return nil
}

// idleConn is a connection whose every read and write must make progress
// within NetTimeout.
type idleConn struct{ net.Conn }

func (c idleConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(NetTimeout()))
	return c.Conn.Read(p)
}

func (c idleConn) Write(p []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(NetTimeout()))
	return c.Conn.Write(p)
}

func dialIdle(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: NetTimeout(), KeepAlive: 30 * time.Second}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return idleConn{c}, nil
}

// installNetTransports gives go-git's http, https and ssh transports
// connections that time out when the remote is silent.
func installNetTransports() {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = dialIdle
	tr.TLSHandshakeTimeout = NetTimeout()
	tr.ResponseHeaderTimeout = NetTimeout()
	hc := githttp.NewClient(&http.Client{Transport: tr})
	client.InstallProtocol("https", hc)
	client.InstallProtocol("http", hc)
	client.InstallProtocol("ssh", gitssh.NewClient(&gossh.ClientConfig{Timeout: NetTimeout()}))
}

// remoteHost is the host (and port) of a repository URL, for messages.
func remoteHost(raw string) string {
	if ep, err := transport.NewEndpoint(raw); err == nil && ep.Host != "" {
		if ep.Port != 0 {
			return fmt.Sprintf("%s:%d", ep.Host, ep.Port)
		}
		return ep.Host
	}
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return raw
}

// isTimeout reports whether err is a remote that stayed silent too long.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "i/o timeout") || strings.Contains(s, "timeout awaiting response headers") || strings.Contains(s, "TLS handshake timeout")
}

package image

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// DefaultPlatform is what a multi-platform index resolves to when no
// platform is asked for (Docker's choice on an x86 host). GH200, GB200
// and DGX Spark hosts are linux/arm64: they name it.
var DefaultPlatform = v1.Platform{OS: "linux", Architecture: "amd64"}

// DefaultTimeout bounds each wait on a registry: connecting, the TLS
// handshake, a response's headers, and any pause in a transfer. A
// registry that accepts the connection and never answers fails the
// request after it instead of hanging the command.
const DefaultTimeout = 30 * time.Second

// Remote configures registry access and which image of a multi-platform
// index is meant. The zero value uses go-containerregistry's default
// keychain (docker config, credential helpers), DefaultPlatform for an
// index, http.DefaultTransport and the library's retries.
type Remote struct {
	Keychain authn.Keychain
	// Platform picks the image of a multi-platform index (a registry's or
	// an OCI layout's); for a single image it is checked against the
	// image's config. Nil: DefaultPlatform for an index, any single image.
	Platform  *v1.Platform
	Transport http.RoundTripper // NewTransport(DefaultTimeout) is the command line's
	// Retries, when set, replaces the library's retry backoff (tests use
	// a short one).
	Retries *remote.Backoff
}

func (r Remote) options(ctx context.Context) []remote.Option {
	kc := r.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc), remote.WithPlatform(r.platform())}
	if r.Transport != nil {
		opts = append(opts, remote.WithTransport(r.Transport))
	}
	if r.Retries != nil {
		opts = append(opts, remote.WithRetryBackoff(*r.Retries))
	}
	return opts
}

// platform is the platform an index resolves to.
func (r Remote) platform() v1.Platform {
	if r.Platform != nil {
		return *r.Platform
	}
	return DefaultPlatform
}

// ParsePlatform reads a --platform value: OS/ARCH or OS/ARCH/VARIANT
// (linux/arm64, linux/arm/v7), lower case, as in an index's platforms.
func ParsePlatform(s string) (*v1.Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("platform %q: want OS/ARCH[/VARIANT], like linux/arm64", s)
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "abcdefghijklmnopqrstuvwxyz0123456789_.-") != "" {
			return nil, fmt.Errorf("platform %q: want OS/ARCH[/VARIANT] in lower-case letters, digits, '.', '_' or '-', like linux/arm64", s)
		}
	}
	p := &v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

// NewTransport is the registry transport of the command line: the
// library's default one with every wait bounded by timeout (connecting,
// TLS, a response's headers, and no byte read or written for that long
// during a transfer).
func NewTransport(timeout time.Duration) http.RoundTripper {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &idleConn{Conn: c, timeout: timeout}, nil
	}
	t.TLSHandshakeTimeout = timeout
	t.ResponseHeaderTimeout = timeout
	// A kept connection is closed before its idle reads time out.
	t.IdleConnTimeout = timeout / 2
	return t
}

// idleConn fails a read or write that waits longer than timeout.
type idleConn struct {
	net.Conn
	timeout time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

package image

import (
	"context"
	"net"
	"strings"
	"testing"
)

// A registry nobody answers for says how to work without one.
func TestOpenUnreachableRegistryHint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: connection refused
	r, err := ParseRef(addr + "/sglang:v1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), r, Remote{})
	if err == nil || !strings.Contains(err.Error(), "registry unreachable; a base that needs none: oci:DIR") {
		t.Fatalf("error %v lacks the offline hint", err)
	}
}

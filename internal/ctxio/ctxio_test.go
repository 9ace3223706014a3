package ctxio

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReaderStopsWhenDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := Reader(ctx, strings.NewReader("abcdef"))
	p := make([]byte, 3)
	if n, err := r.Read(p); n != 3 || err != nil || string(p) != "abc" {
		t.Fatalf("before cancel: %d %v %q", n, err, p)
	}
	cancel()
	if n, err := r.Read(p); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %d %v", n, err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadAll after cancel: %v", err)
	}
}

// Package ctxio owns reads that stop when a context is done: a stream being
// read (a log, an image layer, a file the probe reads) must not outlive the
// command that asked for it. It knows nothing of what is read.
package ctxio

import (
	"context"
	"io"
)

// Reader reads r until ctx is done; from then on every Read returns ctx's
// error and reads nothing.
func Reader(ctx context.Context, r io.Reader) io.Reader {
	return reader{ctx, r}
}

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (c reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

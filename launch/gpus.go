package launch

import (
	"context"
	"fmt"
	"sync"
)

// gpuPool hands out GPU indices to cells that run at the same time, so that
// concurrent small cells do not share a GPU: a cell takes TP of them (the
// lowest free ones) for its whole run.
type gpuPool struct {
	mu   sync.Mutex
	free []bool
	ids  []string
	wake chan struct{} // closed and replaced whenever GPUs are released
}

func newGPUPool(ids []string) *gpuPool {
	p := &gpuPool{ids: ids, free: make([]bool, len(ids)), wake: make(chan struct{})}
	for i := range p.free {
		p.free[i] = true
	}
	return p
}

// acquire waits until n GPUs are free and takes them.
func (p *gpuPool) acquire(ctx context.Context, n int) ([]string, error) {
	if n > len(p.ids) {
		return nil, fmt.Errorf("needs %d GPUs, --gpus lists %d", n, len(p.ids))
	}
	for {
		p.mu.Lock()
		var idx []int
		for i, f := range p.free {
			if f && len(idx) < n {
				idx = append(idx, i)
			}
		}
		if len(idx) == n {
			out := make([]string, n)
			for k, i := range idx {
				p.free[i] = false
				out[k] = p.ids[i]
			}
			p.mu.Unlock()
			return out, nil
		}
		wake := p.wake
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		}
	}
}

func (p *gpuPool) release(ids []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		for i, x := range p.ids {
			if x == id {
				p.free[i] = true
			}
		}
	}
	close(p.wake)
	p.wake = make(chan struct{})
}

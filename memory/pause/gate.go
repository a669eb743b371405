package pause

import (
	"context"
	"sync"

	"github.com/psiflow/psiflow/flow"
)

// Gate is a [flow.Gate] in front of another (nil: none): while paused it admits
// nothing, whatever the other would; reads it already admitted go on. Pause and
// Resume may be called from any goroutine.
type Gate struct {
	inner flow.Gate

	mu      sync.Mutex
	paused  bool
	resumed chan struct{} // closed by Resume; replaced by Pause
	waiting int           // Acquire calls held by the pause
}

var _ flow.Gate = (*Gate)(nil)

// NewGate returns a gate in front of inner that is not paused.
func NewGate(inner flow.Gate) *Gate {
	return &Gate{inner: inner, resumed: make(chan struct{})}
}

// Acquire waits while the gate is paused, then for a permit of the gate behind it;
// it returns ctx's error if ctx ends first.
func (g *Gate) Acquire(ctx context.Context) error {
	for {
		g.mu.Lock()
		if !g.paused {
			g.mu.Unlock()
			break
		}
		ch := g.resumed
		g.waiting++
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if g.inner != nil {
		return g.inner.Acquire(ctx)
	}
	return nil
}

// Release gives back a permit taken by Acquire.
func (g *Gate) Release() {
	if g.inner != nil {
		g.inner.Release()
	}
}

// Pause stops admitting: later Acquire calls wait until Resume.
func (g *Gate) Pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.paused {
		g.paused = true
		g.resumed = make(chan struct{})
	}
}

// Resume admits again and wakes the waiting Acquire calls.
func (g *Gate) Resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused {
		g.paused = false
		close(g.resumed)
	}
}

// Paused reports whether the gate admits nothing now.
func (g *Gate) Paused() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused
}

// Waiting returns how many Acquire calls the pause holds now.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

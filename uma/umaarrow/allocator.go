package umaarrow

import (
	"log/slog"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/psiflow/psiflow/uma"
)

// Allocator implements memory.Allocator over a UMA pool. It is safe for
// concurrent use.
type Allocator struct {
	pool      *uma.Pool
	heap      memory.Allocator
	log       *slog.Logger
	fallbacks atomic.Int64
	live      atomic.Int64
}

var _ memory.Allocator = (*Allocator)(nil)

// Option configures an Allocator.
type Option func(*Allocator)

// WithFallback sets the allocator used when the pool is full (default
// memory.NewGoAllocator()).
func WithFallback(a memory.Allocator) Option { return func(x *Allocator) { x.heap = a } }

// WithLogger sets where misuse (freeing memory that is not a live pool
// allocation) is reported (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(x *Allocator) { x.log = l } }

// New returns an allocator that takes its buffers from pool.
func New(pool *uma.Pool, opts ...Option) *Allocator {
	a := &Allocator{pool: pool, heap: memory.NewGoAllocator(), log: slog.Default()}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Allocate returns size zeroed bytes, 64-byte aligned, from the pool (or
// from the fall-back when the pool is full).
func (a *Allocator) Allocate(size int) []byte {
	if size <= 0 {
		return a.heap.Allocate(0)
	}
	b, err := a.pool.AllocBytes(size)
	if err != nil {
		a.fallbacks.Add(1)
		return a.heap.Allocate(size)
	}
	a.live.Add(1)
	return b
}

// Reallocate grows or shrinks b to size, keeping its contents. It reuses b
// when its capacity suffices.
func (a *Allocator) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

// Free returns b to the pool; memory from the fall-back is left to the GC.
func (a *Allocator) Free(b []byte) {
	if !a.pool.Contains(b) {
		a.heap.Free(b)
		return
	}
	if err := a.pool.FreeBytes(b); err != nil {
		a.log.Error("umaarrow: free", "err", err)
		return
	}
	a.live.Add(-1)
}

// Fallbacks is the number of allocations served by the fall-back allocator
// because the pool was full.
func (a *Allocator) Fallbacks() int64 { return a.fallbacks.Load() }

// Live is the number of pool allocations not yet freed.
func (a *Allocator) Live() int64 { return a.live.Load() }

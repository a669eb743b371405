package flow

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Budget limits the bytes in flight in a graph. A source acquires bytes before
// it produces an element (see [Emitter.Reserve]); the bytes come back when the
// element's last claim is dropped downstream. Waiters are served in FIFO order
// so a large request is not starved by small ones. Safe for concurrent use.
type Budget struct {
	// limit is the current size; ceiling the largest size ever set, against which
	// a request is oversize. Both change only under mu (SetLimit).
	limit, ceiling atomic.Int64

	mu      sync.Mutex
	inUse   int64
	waiters []*budgetWaiter

	maxInUse atomic.Int64
	waitNs   atomic.Int64
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

// ErrOversize is returned when one request exceeds the whole budget.
type ErrOversize struct {
	Request, Limit int64
}

func (e *ErrOversize) Error() string {
	return fmt.Sprintf("flow: request of %d bytes exceeds the byte budget of %d bytes", e.Request, e.Limit)
}

// NewBudget returns a budget of limit bytes; limit must be positive.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		panic(fmt.Sprintf("flow.NewBudget: limit %d must be positive", limit))
	}
	b := &Budget{}
	b.limit.Store(limit)
	b.ceiling.Store(limit)
	return b
}

// Limit returns the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit.Load() }

// SetLimit resizes the budget to limit bytes (which must be positive) while it is
// in use, for a budget that follows the memory its cgroup leaves free. Growing
// wakes the waiters that now fit. Shrinking revokes nothing: bytes already taken
// stay taken, and new requests wait until the bytes in use fall below the new
// limit. A request larger than the current limit but not larger than the largest
// limit ever set is not oversize: it is granted alone, once nothing else is in use,
// so a shrunken budget slows a graph down instead of failing it.
func (b *Budget) SetLimit(limit int64) error {
	if limit <= 0 {
		return fmt.Errorf("flow: budget limit %d bytes: must be positive", limit)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.limit.Store(limit)
	if limit > b.ceiling.Load() {
		b.ceiling.Store(limit)
	}
	b.grant()
	return nil
}

// fits reports whether n more bytes may be taken now; mu must be held.
func (b *Budget) fits(n int64) bool {
	return b.inUse+n <= b.limit.Load() || b.inUse == 0
}

// InUse returns the bytes currently acquired.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse
}

// Waiting returns the bytes the first waiting Acquire asks for, or 0 when
// nobody waits.
func (b *Budget) Waiting() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) == 0 {
		return 0
	}
	return b.waiters[0].n
}

// MaxInUse returns the most bytes that were ever acquired at once.
func (b *Budget) MaxInUse() int64 { return b.maxInUse.Load() }

// WaitTime returns the total time callers spent waiting in Acquire.
func (b *Budget) WaitTime() time.Duration { return time.Duration(b.waitNs.Load()) }

// Acquire waits until n bytes are available, takes them, and returns nil; or
// returns ctx's error, having taken nothing. A request larger than the whole
// budget fails at once with [*ErrOversize].
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	if c := b.ceiling.Load(); n > c {
		return &ErrOversize{Request: n, Limit: c}
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fits(n) {
		b.take(n)
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	t0 := time.Now()
	defer func() { b.waitNs.Add(int64(time.Since(t0))) }()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.inUse -= n
			b.grant()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grant() // the head may have changed
		}
		return ctx.Err()
	}
}

// TryAcquire takes n bytes if they are available now and nobody is waiting.
func (b *Budget) TryAcquire(n int64) bool {
	if n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) == 0 && b.fits(n) {
		b.take(n)
		return true
	}
	return false
}

// Release gives back n bytes taken by Acquire or TryAcquire. Releasing more
// than is in use panics: it means a double release, a bug that would let the
// graph exceed its budget.
func (b *Budget) Release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inUse -= n
	if b.inUse < 0 {
		panic(fmt.Sprintf("flow: budget released %d bytes more than acquired", -b.inUse))
	}
	b.grant()
}

// take must be called with mu held.
func (b *Budget) take(n int64) {
	b.inUse += n
	for {
		m := b.maxInUse.Load()
		if b.inUse <= m || b.maxInUse.CompareAndSwap(m, b.inUse) {
			return
		}
	}
}

// grant wakes waiters in order while they fit; mu must be held.
func (b *Budget) grant() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if !b.fits(w.n) {
			return
		}
		b.take(w.n)
		b.waiters = b.waiters[1:]
		close(w.ready)
	}
}

package decode

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Budget is the part of a graph's byte budget (flow.Budget implements it)
// that the decode stage reserves decoded bytes from.
type Budget interface {
	// Limit is the budget's size in bytes.
	Limit() int64
	// TryAcquire takes n bytes if they are free now and nobody waits.
	TryAcquire(n int64) bool
	// Acquire waits for n bytes (n ≤ Limit) or for ctx.
	Acquire(ctx context.Context, n int64) error
	// Overdraw takes n bytes at once, beyond the limit if need be.
	Overdraw(n int64)
	// Release gives back bytes taken by the three calls above.
	Release(n int64)
}

// DefaultBudgetWait is how long a decode worker waits for its decoded bytes
// in a full budget before it decodes on an overdraft (StageConfig.BudgetWait).
const DefaultBudgetWait = 50 * time.Millisecond

// maxPlanBytes refuses any one image that would need more than this (1 TiB),
// whatever the limits say: such a figure is a crafted header, and sums near
// it would overflow the budget's counters.
const maxPlanBytes = 1 << 40

// ReserveStats counts how a decode stage reserved its decoded bytes. All
// fields are safe to read while the stage runs.
type ReserveStats struct {
	// Reserved counts images whose bytes fitted in the budget.
	Reserved atomic.Int64
	// Overdrafts counts images decoded on an overdraft: their bytes did not
	// fit after the wait, or exceeded the whole budget.
	Overdrafts atomic.Int64
	// OverdraftBytes is the total of those images' bytes.
	OverdraftBytes atomic.Int64
	// MaxImageBytes is the largest reservation made for one image.
	MaxImageBytes atomic.Int64
}

// reserver takes each image's bytes from the budget before it is decoded.
//
// A decode worker cannot simply wait for its bytes: the budget may be full
// of compressed samples that only decoding can move on (a batch that holds
// half the budget waits for the very sample the worker is decoding), so a
// plain wait can deadlock, and an image larger than the whole budget would
// wait forever. So a worker takes its bytes at once when they are free;
// else, if they are at most half the budget, it waits up to wait for them
// (less than the 300 ms after which package stage's Batch reports a stalled
// budget: three checks in a row); else, or when the wait ran out, it decodes on an overdraft: it
// takes the bytes beyond the limit (the sources wait until they are paid
// back), one image at a time per stage. The overdraft is bounded: at most
// one image, and an image is bounded by the pixel limit. With the pixel
// limit turned off there is no bound, so an image larger than the whole
// budget is refused instead.
type reserver struct {
	b       Budget
	wait    time.Duration
	bounded bool          // the decoder has a pixel limit
	sem     chan struct{} // one overdraft at a time
	stats   *ReserveStats
}

func (r *reserver) reserve(ctx context.Context, n int64) (release func(), err error) {
	if n > maxPlanBytes {
		return nil, fmt.Errorf("decoding needs %d bytes, more than the %d any one image may have", n, int64(maxPlanBytes))
	}
	if r.b == nil || n <= 0 {
		return func() {}, nil
	}
	for {
		m := r.stats.MaxImageBytes.Load()
		if n <= m || r.stats.MaxImageBytes.CompareAndSwap(m, n) {
			break
		}
	}
	limit := r.b.Limit()
	done := func() { r.b.Release(n) }
	if n <= limit {
		if r.b.TryAcquire(n) {
			r.stats.Reserved.Add(1)
			return done, nil
		}
		if n <= limit/2 {
			wctx, cancel := context.WithTimeout(ctx, r.wait)
			err := r.b.Acquire(wctx, n)
			cancel()
			if err == nil {
				r.stats.Reserved.Add(1)
				return done, nil
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	} else if !r.bounded {
		return nil, fmt.Errorf("decoding needs %d bytes, more than the whole byte budget of %d, and no pixel limit bounds an overdraft: raise the budget or set a pixel limit", n, limit)
	}
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if n <= limit && r.b.TryAcquire(n) { // room came back while waiting for the turn
		<-r.sem
		r.stats.Reserved.Add(1)
		return done, nil
	}
	r.b.Overdraw(n)
	r.stats.Overdrafts.Add(1)
	r.stats.OverdraftBytes.Add(n)
	return func() { r.b.Release(n); <-r.sem }, nil
}

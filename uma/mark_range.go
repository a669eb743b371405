package uma

import (
	"context"
	"errors"
	"fmt"
)

// MarkRangePreemptible makes the chunks covering [off, off+n) PREEMPTIBLE, like
// [Arena.MarkPreemptible] but for exactly these chunks rather than the coldest of the
// whole arena: a cache marks each entry as soon as it is written, at the cost of one
// checksum and one madvise per chunk. Chunks already PREEMPTIBLE are left as they
// are; chunks with leases, pins, stable leases or device registrations, LOCKED_TX or
// EVICTED chunks, busy chunks and chunks without a re-hydrate function (unless
// ArenaOptions.PreemptWithoutSource) are skipped and counted in the result.
func (a *Arena) MarkRangePreemptible(ctx context.Context, off, n int64) (MarkResult, error) {
	var res MarkResult
	if a.pool != nil {
		return res, fmt.Errorf("uma: mark preemptible on pool %q: pool memory has no source to re-hydrate from (use Trim)", a.name)
	}
	lo, hi, err := a.chunkRange(off, n)
	if err != nil {
		return res, err
	}
	if ok, err := a.beginMark(&res); !ok {
		return res, err
	}
	u := a.u
	var cand []int
	for i := lo; i <= hi; i++ {
		switch {
		case a.chunks[i].state == Preemptible:
		case a.eligibleLocked(i, Hot, Cold, CopiedGPU) && !a.sourcedLocked(i):
			res.NoSource++
			res.Skipped++
		case a.eligibleLocked(i, Hot, Cold, CopiedGPU):
			cand = append(cand, i)
			a.chunks[i].busy = make(chan struct{})
		default:
			res.Skipped++
			if a.chunks[i].regs > 0 {
				res.Registered++
			}
		}
	}
	u.mu.Unlock()
	return a.markChunks(ctx, cand, res)
}

// EvictRange drops the chunks covering [off, off+n) at once (MADV_DONTNEED): they
// become EVICTED and are re-hydrated, or refused with [ErrNoRehydrate], on next use.
// Chunks with leases, pins, stable leases or transfers, busy chunks and chunks
// without a source (unless ArenaOptions.PreemptWithoutSource) are left alone. It
// returns the bytes evicted.
func (a *Arena) EvictRange(off, n int64) (int64, error) {
	if a.pool != nil {
		return 0, fmt.Errorf("uma: evict on pool %q: use Trim", a.name)
	}
	lo, hi, err := a.chunkRange(off, n)
	if err != nil {
		return 0, err
	}
	u := a.u
	u.mu.Lock()
	if err := a.checkOpenLocked("evict"); err != nil {
		u.mu.Unlock()
		return 0, err
	}
	var cand []int
	for i := lo; i <= hi; i++ {
		if a.eligibleLocked(i, Hot, Cold, CopiedGPU, Preemptible) && a.sourcedLocked(i) {
			cand = append(cand, i)
			a.chunks[i].busy = make(chan struct{})
		}
	}
	u.mu.Unlock()
	return a.evictChunks(cand)
}

// PageOut makes the kernel take the PREEMPTIBLE chunks covering [off, off+n) now,
// as memory pressure would, without telling the ledger: the chunks stay PREEMPTIBLE
// and the next acquire finds the loss (a fault, then re-hydration or
// [ErrNoRehydrate]). It makes "the kernel took it" deterministic for tests and
// benchmarks. Chunks in other states are left alone. It returns the number of chunks
// paged out.
//
// It drops the lazily freed pages with MADV_DONTNEED, which leaves them exactly as
// reclaim does (unmapped, uncharged, zero when read). MADV_PAGEOUT would not be
// deterministic: MADV_FREE queues the pages on a per-CPU batch, and until the CPU
// that ran it drains that batch they still count as swap-backed, so MADV_PAGEOUT
// from another CPU leaves them resident (measured on Linux 6.18: 199 of 200 trials
// with MADV_FREE on one CPU and MADV_PAGEOUT on the other kept their pages, 0 of
// 200 on the same CPU).
func (a *Arena) PageOut(off, n int64) (int, error) {
	lo, hi, err := a.chunkRange(off, n)
	if err != nil {
		return 0, err
	}
	u := a.u
	u.mu.Lock()
	if err := a.checkOpenLocked("page out"); err != nil {
		u.mu.Unlock()
		return 0, err
	}
	var cand []int
	for i := lo; i <= hi; i++ {
		if a.eligibleLocked(i, Preemptible) {
			cand = append(cand, i)
			a.chunks[i].busy = make(chan struct{})
		}
	}
	u.mu.Unlock()
	var errs []error
	for _, i := range cand {
		if err := u.k.madvise(a.span(i), adviseDontNeed); err != nil {
			errs = append(errs, fmt.Errorf("uma: page out chunk %s: %w", a.id(i), err))
		}
	}
	u.mu.Lock()
	a.unclaimLocked2(cand)
	u.mu.Unlock()
	return len(cand) - len(errs), errors.Join(errs...)
}

// Resident counts the resident pages of the range with mincore, without touching
// them (a page the kernel reclaimed and nobody read since is not resident). It
// cannot prove bytes intact; only an acquire does.
func (a *Arena) Resident(off, n int64) (resident, pages int, err error) {
	if _, _, err := a.chunkRange(off, n); err != nil {
		return 0, 0, err
	}
	resident, pages = a.residentPages(a.mem[off : off+n])
	if resident < 0 {
		return 0, pages, fmt.Errorf("uma: arena %q: mincore failed", a.name)
	}
	return resident, pages, nil
}

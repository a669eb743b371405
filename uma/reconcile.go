package uma

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ReconcileResult says what Reconcile found.
type ReconcileResult struct {
	// Checked is the number of PREEMPTIBLE chunks examined.
	Checked int
	// Reclaimed chunks had pages taken by the kernel; they are EVICTED now.
	Reclaimed int
	// Bytes is the size of the reclaimed chunks.
	Bytes int64
}

// Reconcile aligns the ledger with what the kernel did: every PREEMPTIBLE
// chunk is checked with mincore, without touching it. A chunk with pages the
// kernel took counts as a fault and becomes EVICTED at once, its remaining
// lazily freed pages dropped with MADV_DONTNEED, so that the preemptible
// bytes reported are bytes still resident and the next use of the chunk goes
// straight to re-hydration. Chunks found whole stay PREEMPTIBLE (mincore
// cannot prove them intact; re-acquiring still verifies the checksum).
// Run it periodically (see RunReconciler) or before reading telemetry.
func (u *UMA) Reconcile(ctx context.Context) (ReconcileResult, error) {
	var res ReconcileResult
	u.mu.Lock()
	arenas := append([]*Arena(nil), u.order...)
	u.mu.Unlock()
	var errs []error
	for _, a := range arenas {
		if a.pool != nil {
			continue
		}
		r, err := a.reconcile(ctx)
		res.Checked += r.Checked
		res.Reclaimed += r.Reclaimed
		res.Bytes += r.Bytes
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

func (a *Arena) reconcile(ctx context.Context) (ReconcileResult, error) {
	var res ReconcileResult
	u := a.u
	u.mu.Lock()
	if a.closed {
		u.mu.Unlock()
		return res, nil
	}
	var cand []int
	for i := range a.chunks {
		if a.eligibleLocked(i, Preemptible) {
			cand = append(cand, i)
			a.chunks[i].busy = make(chan struct{})
		}
	}
	u.mu.Unlock()
	gone := make([]bool, len(cand))
	errs := make([]error, len(cand))
	for k, i := range cand {
		if err := ctx.Err(); err != nil {
			errs[k] = fmt.Errorf("uma: reconcile chunk %s: %w", a.id(i), err)
			continue
		}
		b := a.span(i)
		r, pages := a.residentPages(b)
		if r < 0 || r == pages {
			continue
		}
		if err := u.k.madvise(b, adviseDontNeed); err != nil {
			errs[k] = fmt.Errorf("uma: reconcile chunk %s: %w", a.id(i), err)
			continue
		}
		gone[k] = true
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	res.Checked = len(cand)
	for k, i := range cand {
		if !gone[k] {
			continue
		}
		if err := a.setLocked(i, Evicted, "reconcile"); err != nil {
			errs[k] = err
			continue
		}
		res.Reclaimed++
		res.Bytes += a.chunkLen(i)
		u.faults.Add(1)
		u.rate.add(u.now())
	}
	a.unclaimLocked2(cand)
	return res, errors.Join(errs...)
}

// RunReconciler calls Reconcile every interval until ctx ends, and returns
// ctx's error. Errors from Reconcile are logged, not fatal.
func (u *UMA) RunReconciler(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if _, err := u.Reconcile(ctx); err != nil && ctx.Err() == nil {
				u.log.Warn("uma: reconcile", "err", err)
			}
		}
	}
}

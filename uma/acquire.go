package uma

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// restoreJob is one chunk to make resident and intact.
type restoreJob struct {
	i      int
	from   State
	hasSum bool
	sum    uint64
	fn     RehydrateFunc
	// results
	faulted, rehydrated bool
	err                 error
}

// acquireSpec describes one acquire: which chunks, what to do once they are
// resident and intact.
type acquireSpec struct {
	op     string
	lo, hi int
	// claim forces the slow path (check needs a consistent view with claims).
	claim bool
	// overwritten reports chunks that the caller overwrites entirely, so their
	// old bytes need not be restored.
	overwritten func(i int) bool
	// check runs under u.mu before any restore (e.g. a tier reservation); undo
	// reverts it when a restore fails.
	check func() error
	undo  func()
	// apply runs under u.mu once every chunk is resident and intact.
	apply func() error
	// keep leaves the chunks claimed after a successful apply (the caller
	// unclaims them); it needs claim.
	keep bool
}

func needsRestore(s State) bool { return s == Preemptible || s == Evicted }

// acquire is the one path by which bytes are handed out: chunks that are
// PREEMPTIBLE or EVICTED are restored first (see restore), then spec.apply
// runs under the ledger lock.
func (a *Arena) acquire(ctx context.Context, s acquireSpec) error {
	u := a.u
	u.mu.Lock()
	if err := a.checkOpenLocked(s.op); err != nil {
		u.mu.Unlock()
		return err
	}
	if !s.claim {
		fast := true
		for i := s.lo; i <= s.hi; i++ {
			c := &a.chunks[i]
			if c.busy != nil || needsRestore(c.state) {
				fast = false
				break
			}
		}
		if fast {
			err := s.runCheck()
			if err == nil {
				err = s.apply()
				if err != nil && s.undo != nil {
					s.undo()
				}
			}
			u.mu.Unlock()
			return err
		}
	}
	if err := a.claimLocked(ctx, s.lo, s.hi, s.op); err != nil {
		u.mu.Unlock()
		return err
	}
	if err := s.runCheck(); err != nil {
		a.unclaimLocked(s.lo, s.hi)
		u.mu.Unlock()
		return err
	}
	var jobs []restoreJob
	for i := s.lo; i <= s.hi; i++ {
		c := &a.chunks[i]
		if !needsRestore(c.state) || (s.overwritten != nil && s.overwritten(i)) {
			continue
		}
		fn := c.rehydrate
		if fn == nil {
			fn = a.fn
		}
		jobs = append(jobs, restoreJob{i: i, from: c.state, hasSum: c.hasSum, sum: c.sum, fn: fn})
	}
	u.mu.Unlock()

	for j := range jobs {
		a.restore(ctx, &jobs[j])
	}

	u.mu.Lock()
	defer u.mu.Unlock()
	keep := false
	defer func() {
		if !keep {
			a.unclaimLocked(s.lo, s.hi)
		}
	}()
	var errs []error
	for _, j := range jobs {
		c := &a.chunks[j.i]
		if j.err != nil {
			if j.from == Preemptible && errors.Is(j.err, ErrNoRehydrate) {
				_ = a.setLocked(j.i, Evicted, s.op)
			}
			errs = append(errs, j.err)
			continue
		}
		if err := a.setLocked(j.i, Hot, s.op); err != nil {
			errs = append(errs, err)
			continue
		}
		c.hasSum = false
	}
	if err := errors.Join(errs...); err != nil {
		if s.undo != nil {
			s.undo()
		}
		return err
	}
	if s.overwritten != nil {
		for i := s.lo; i <= s.hi; i++ {
			if needsRestore(a.chunks[i].state) && s.overwritten(i) {
				if err := a.setLocked(i, Hot, s.op); err != nil {
					errs = append(errs, err)
				}
				a.chunks[i].hasSum = false
			}
		}
		if err := errors.Join(errs...); err != nil {
			if s.undo != nil {
				s.undo()
			}
			return err
		}
	}
	err := s.apply()
	if err != nil && s.undo != nil {
		s.undo()
	}
	keep = err == nil && s.keep
	return err
}

func (s *acquireSpec) runCheck() error {
	if s.check == nil {
		return nil
	}
	return s.check()
}

// touchPages writes every page of b without changing it: the first word of
// each page is read and the same value written back. Being a write, it
// cancels MADV_FREE on a page that is still lazily freed (the kernel then
// keeps its data) and faults a fresh zero page into one that was already
// reclaimed. If the kernel reclaims a page between the read and the write,
// the page ends up holding one old word and zeros: still a page the kernel
// can no longer take, whose content the checksum then judges. The read is an
// atomic load so that the compiler cannot fold "store what was just loaded"
// away (a plain b[i] = b[i] may be removed); the store is plain so that the
// CPU overlaps the cache misses of many pages (a locked add serialises them).
func touchPages(b []byte, page int) {
	for off := 0; off+4 <= len(b); off += page {
		p := (*uint32)(unsafe.Pointer(&b[off]))
		*p = atomic.LoadUint32(p)
	}
}

// residentPages counts the resident pages of b with mincore, before anything
// touches them. It returns -1 when mincore failed (the checksum decides then).
func (a *Arena) residentPages(b []byte) (resident, pages int) {
	pages = (len(b) + a.u.page - 1) / a.u.page
	vec := make([]byte, pages)
	if err := a.u.k.mincore(b, vec); err != nil {
		return -1, pages
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, pages
}

// restore makes chunk j.i resident and intact; see the package doc for why it
// is race-free. It runs without u.mu while the chunk is claimed.
func (a *Arena) restore(ctx context.Context, j *restoreJob) {
	b := a.span(j.i)
	if j.from == Preemptible {
		resident, pages := a.residentPages(b)
		touchPages(b, a.u.page)
		if resident == pages || resident < 0 {
			if j.hasSum && xxh3.Hash(b) == j.sum {
				return // intact: every page kept its data and can no longer be reclaimed
			}
		}
		j.faulted = true
		a.u.faults.Add(1)
		a.u.rate.add(a.u.now())
	}
	if j.fn == nil {
		j.err = fmt.Errorf("uma: chunk %s (%s): %w", a.id(j.i), j.from, ErrNoRehydrate)
		return
	}
	start := time.Now()
	if err := j.fn(ctx, a.id(j.i), b[:a.dataLen(j.i)]); err != nil {
		j.err = fmt.Errorf("uma: re-hydrating chunk %s: %w", a.id(j.i), err)
		return
	}
	if j.hasSum {
		if got := xxh3.Hash(b); got != j.sum {
			j.err = fmt.Errorf("uma: re-hydrated chunk %s differs from the bytes marked preemptible (xxh3 %016x, want %016x)", a.id(j.i), got, j.sum)
			return
		}
	}
	j.rehydrated = true
	a.u.rehydrations.Add(1)
	if a.u.metrics != nil {
		a.u.metrics.rehydrate.Observe(time.Since(start).Seconds())
	}
}

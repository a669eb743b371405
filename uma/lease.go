package uma

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// ByteLease is a reference-counted lease on bytes that travel through a graph.
// It holds its chunks resident (they are never marked preemptible or evicted
// while leased) and n bytes of the graph's byte budget, acquired before the
// bytes were taken and released when the last reference is released.
// It implements flow's Releaser.
type ByteLease struct {
	a      *Arena
	off, n int64
	lo, hi int
	budget Budget
	refs   atomic.Int32
	// alloc is true for pool allocations: the last release frees the range.
	alloc bool
}

// Bytes are the leased bytes; valid until the last Release.
func (l *ByteLease) Bytes() []byte { return l.a.mem[l.off : l.off+l.n : l.off+l.n] }

// Len is the number of leased bytes.
func (l *ByteLease) Len() int { return int(l.n) }

// Offset is the lease's offset in its arena.
func (l *ByteLease) Offset() int64 { return l.off }

// Arena is the arena the bytes live in.
func (l *ByteLease) Arena() *Arena { return l.a }

// Retain adds a reference (for fan-out: each branch releases its own); it
// makes a byte lease a stage.Retainer. Retaining a released lease is a bug
// and is logged.
func (l *ByteLease) Retain() {
	if l.refs.Add(1) <= 1 {
		l.refs.Add(-1)
		l.a.u.log.Error("uma: Retain of a released byte lease", "arena", l.a.name, "offset", l.off, "bytes", l.n)
	}
}

// Release drops one reference; the last one returns the bytes to the ledger
// and to the budget. Releasing more often than retained is logged and ignored.
func (l *ByteLease) Release() {
	switch r := l.refs.Add(-1); {
	case r > 0:
		return
	case r < 0:
		l.refs.Add(1)
		l.a.u.log.Error("uma: byte lease released more often than retained", "arena", l.a.name, "offset", l.off, "bytes", l.n)
		return
	}
	u := l.a.u
	u.mu.Lock()
	if l.alloc {
		l.a.pool.freeLocked(l.off) // drops the chunk references too
	} else {
		for i := l.lo; i <= l.hi; i++ {
			l.a.chunks[i].refs--
		}
	}
	l.a.touchLocked(l.lo, l.hi, "release")
	l.a.leases.bytes--
	u.leases.bytes--
	u.bump()
	u.mu.Unlock()
	if l.budget != nil {
		l.budget.Release(l.n)
	}
}

// Lease leases n bytes at off. The budget (may be nil) is acquired first;
// then PREEMPTIBLE or EVICTED chunks are made resident and intact (verified
// or re-hydrated); only then are the bytes handed out.
func (a *Arena) Lease(ctx context.Context, off, n int64, budget Budget) (*ByteLease, error) {
	if a.pool != nil {
		return nil, fmt.Errorf("uma: lease on pool %q: use Alloc", a.name)
	}
	lo, hi, err := a.chunkRange(off, n)
	if err != nil {
		return nil, err
	}
	if budget != nil {
		if err := budget.Acquire(ctx, n); err != nil {
			return nil, fmt.Errorf("uma: lease [%d,%d) of arena %q: byte budget: %w", off, off+n, a.name, err)
		}
	}
	l := &ByteLease{a: a, off: off, n: n, lo: lo, hi: hi, budget: budget}
	l.refs.Store(1)
	err = a.acquire(ctx, acquireSpec{op: "lease", lo: lo, hi: hi, apply: func() error {
		for i := lo; i <= hi; i++ {
			a.chunks[i].refs++
		}
		a.touchLocked(lo, hi, "lease")
		a.leases.bytes++
		a.u.leases.bytes++
		a.u.bump()
		return nil
	}})
	if err != nil {
		if budget != nil {
			budget.Release(n)
		}
		return nil, err
	}
	return l, nil
}

// PinLease keeps a range resident with mlock for an export or a direct
// write (DMA, RDMA, CUDA host registration). Pinned chunks are never marked
// preemptible or evicted. When mlock fails with EPERM or ENOMEM, UMA stops
// calling mlock (logged once) and pin leases keep only their reference-count
// meaning.
type PinLease struct {
	a        *Arena
	off, n   int64
	lo, hi   int
	released atomic.Bool
}

// Bytes are the pinned bytes; valid until Release.
func (p *PinLease) Bytes() []byte { return p.a.mem[p.off : p.off+p.n : p.off+p.n] }

// Pin makes the range resident and intact and pins it.
func (a *Arena) Pin(ctx context.Context, off, n int64) (*PinLease, error) {
	if a.pool != nil {
		return nil, fmt.Errorf("uma: pin on pool %q: not supported", a.name)
	}
	lo, hi, err := a.chunkRange(off, n)
	if err != nil {
		return nil, err
	}
	err = a.acquire(ctx, acquireSpec{op: "pin", lo: lo, hi: hi, apply: func() error {
		for i := lo; i <= hi; i++ {
			c := &a.chunks[i]
			if c.pins == 0 && !c.mlocked && !a.u.mlockOff.Load() {
				if err := a.u.k.mlock(a.span(i)); err != nil {
					if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOMEM) {
						a.u.disableMlock(err)
					} else {
						for k := lo; k < i; k++ {
							a.unpinLocked(k)
						}
						return fmt.Errorf("uma: pin chunk %s: %w", a.id(i), err)
					}
				} else {
					c.mlocked = true
				}
			}
			c.pins++
		}
		a.touchLocked(lo, hi, "pin")
		a.leases.pins++
		a.u.leases.pins++
		a.u.bump()
		return nil
	}})
	if err != nil {
		return nil, err
	}
	return &PinLease{a: a, off: off, n: n, lo: lo, hi: hi}, nil
}

func (u *UMA) disableMlock(err error) {
	u.mlockOff.Store(true)
	u.mlockOnce.Do(func() {
		u.log.Warn("uma: mlock refused; pin leases continue without mlock (reference counts only)", "err", err)
	})
}

func (a *Arena) unpinLocked(i int) {
	c := &a.chunks[i]
	c.pins--
	if c.pins == 0 && c.mlocked {
		if err := a.u.k.munlock(a.span(i)); err != nil {
			a.u.log.Error("uma: munlock failed", "chunk", a.id(i).String(), "err", err)
		}
		c.mlocked = false
	}
}

// Release unpins (munlock once the chunk's last pin goes). A second Release
// is ignored.
func (p *PinLease) Release() {
	if p.released.Swap(true) {
		return
	}
	u := p.a.u
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := p.lo; i <= p.hi; i++ {
		p.a.unpinLocked(i)
	}
	p.a.leases.pins--
	u.leases.pins--
	u.bump()
}

// StableLease holds chunks in the STABLE state under the stable tier
// budget: they are never marked preemptible or evicted.
type StableLease struct {
	a        *Arena
	lo, hi   int
	released atomic.Bool
}

// StableBudgetError is a refused stable lease: it names the chunks and the
// numbers. It wraps ErrStableBudget.
type StableBudgetError struct {
	Arena          string
	First, Last    int
	Need           int64
	Used, Capacity int64
}

// Error names the chunks and shows the need, the use and the tier.
func (e *StableBudgetError) Error() string {
	return fmt.Sprintf("uma: stable lease on chunks %s#%d..%d refused: needs %d bytes, stable tier has %d of %d bytes in use (Config.StableBytes)",
		e.Arena, e.First, e.Last, e.Need, e.Used, e.Capacity)
}

// Unwrap makes errors.Is(err, ErrStableBudget) true.
func (e *StableBudgetError) Unwrap() error { return ErrStableBudget }

// AcquireStable takes a stable lease on the chunks covering [off, off+n). A
// refusal by the tier budget returns a *StableBudgetError and leaves the
// ledger (and its version) as it was.
func (a *Arena) AcquireStable(ctx context.Context, off, n int64) (*StableLease, error) {
	if a.pool != nil {
		return nil, fmt.Errorf("uma: stable lease on pool %q: not supported", a.name)
	}
	lo, hi, err := a.chunkRange(off, n)
	if err != nil {
		return nil, err
	}
	u := a.u
	var need int64
	var savedVersion uint64
	err = a.acquire(ctx, acquireSpec{op: "stable", lo: lo, hi: hi, claim: true,
		check: func() error {
			savedVersion = u.version
			u.bump() // tentative: the reservation below is a ledger change
			need = 0
			for i := lo; i <= hi; i++ {
				if a.chunks[i].stables == 0 {
					need += a.chunkLen(i)
				}
			}
			if u.stableUsed+need > u.cfg.StableBytes {
				u.version = savedVersion // roll back: nothing changed
				return &StableBudgetError{Arena: a.name, First: lo, Last: hi, Need: need, Used: u.stableUsed, Capacity: u.cfg.StableBytes}
			}
			u.stableUsed += need
			return nil
		},
		undo: func() {
			u.stableUsed -= need
		},
		apply: func() error {
			for i := lo; i <= hi; i++ {
				if st := a.chunks[i].state; st != LockedTx && !Allowed(st, Stable) {
					return &TransitionError{Chunk: a.id(i), From: st, To: Stable, Op: "stable"}
				}
			}
			for i := lo; i <= hi; i++ {
				c := &a.chunks[i]
				c.stables++
				if c.state != LockedTx {
					_ = a.setLocked(i, Stable, "stable")
				}
			}
			a.touchLocked(lo, hi, "stable")
			a.leases.stables++
			u.leases.stables++
			return nil
		}})
	if err != nil {
		return nil, err
	}
	return &StableLease{a: a, lo: lo, hi: hi}, nil
}

func (a *Arena) unstableLocked(i int) {
	c := &a.chunks[i]
	c.stables--
	if c.stables == 0 {
		a.u.stableUsed -= a.chunkLen(i)
		if c.state == Stable {
			_ = a.setLocked(i, Hot, "stable release")
		}
	}
}

// Release returns the stable lease; chunks without stable leases become HOT.
// A second Release is ignored.
func (s *StableLease) Release() {
	if s.released.Swap(true) {
		return
	}
	u := s.a.u
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := s.lo; i <= s.hi; i++ {
		s.a.unstableLocked(i)
	}
	s.a.leases.stables--
	u.leases.stables--
	u.bump()
}

// Export is bytes handed to a consumer outside UMA (a P2P or RDMA transfer,
// a CUDA host registration): resident, verified intact, pinned, and, if
// asked, under a stable lease. Nothing that is not resident and intact is
// ever exported.
type Export struct {
	pin    *PinLease
	stable *StableLease
}

// Bytes are the exported bytes; valid until Release.
func (e *Export) Bytes() []byte { return e.pin.Bytes() }

// Release ends the export.
func (e *Export) Release() {
	if e.stable != nil {
		e.stable.Release()
	}
	e.pin.Release()
}

// Export ensures [off, off+n) is resident and intact (verifying or
// re-hydrating preempted chunks), pins it and, with stable, takes a stable
// lease so it stays out of preemption after the export too.
func (a *Arena) Export(ctx context.Context, off, n int64, stable bool) (*Export, error) {
	e := &Export{}
	if stable {
		s, err := a.AcquireStable(ctx, off, n)
		if err != nil {
			return nil, fmt.Errorf("uma: export: %w", err)
		}
		e.stable = s
	}
	p, err := a.Pin(ctx, off, n)
	if err != nil {
		if e.stable != nil {
			e.stable.Release()
		}
		return nil, fmt.Errorf("uma: export: %w", err)
	}
	e.pin = p
	return e, nil
}

// Transfer is a range being copied to a device: its chunks are LOCKED_TX
// until Done.
type Transfer struct {
	a      *Arena
	off, n int64
	lo, hi int
	done   atomic.Bool
}

// BeginTransfer makes [off, off+n) resident and intact and locks it for a
// transfer (state LOCKED_TX).
func (a *Arena) BeginTransfer(ctx context.Context, off, n int64) (*Transfer, error) {
	if a.pool != nil {
		return nil, fmt.Errorf("uma: transfer on pool %q: not supported", a.name)
	}
	lo, hi, err := a.chunkRange(off, n)
	if err != nil {
		return nil, err
	}
	err = a.acquire(ctx, acquireSpec{op: "transfer", lo: lo, hi: hi, apply: func() error {
		for i := lo; i <= hi; i++ {
			if st := a.chunks[i].state; !Allowed(st, LockedTx) {
				return &TransitionError{Chunk: a.id(i), From: st, To: LockedTx, Op: "transfer"}
			}
		}
		for i := lo; i <= hi; i++ {
			_ = a.setLocked(i, LockedTx, "transfer")
			a.chunks[i].txs++
		}
		a.touchLocked(lo, hi, "transfer")
		a.leases.transfers++
		a.u.leases.transfers++
		return nil
	}})
	if err != nil {
		return nil, err
	}
	return &Transfer{a: a, off: off, n: n, lo: lo, hi: hi}, nil
}

// Bytes are the bytes to copy; valid until Done.
func (t *Transfer) Bytes() []byte { return t.a.mem[t.off : t.off+t.n : t.off+t.n] }

func (a *Arena) endTxLocked(i int, ok bool) {
	c := &a.chunks[i]
	c.txs--
	if c.txs > 0 {
		return
	}
	to := Hot
	switch {
	case c.stables > 0:
		to = Stable
	case ok:
		to = CopiedGPU
	}
	_ = a.setLocked(i, to, "transfer end")
}

// Done ends the transfer: on success the chunks become COPIED_GPU (STABLE if
// stable leases hold them), else HOT. A second Done is ignored.
func (t *Transfer) Done(ok bool) {
	if t.done.Swap(true) {
		return
	}
	u := t.a.u
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := t.lo; i <= t.hi; i++ {
		t.a.endTxLocked(i, ok)
	}
	t.a.leases.transfers--
	u.leases.transfers--
	u.bump()
}

// Release aborts the transfer if Done was not called (so a graph that drops
// it leaves nothing locked).
func (t *Transfer) Release() { t.Done(false) }

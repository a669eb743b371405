package uma

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"unsafe"
)

// poolAlign is the alignment of pool allocations (Arrow wants 64 bytes).
const poolAlign = 64

type extent struct{ off, n int64 }

// Pool is an arena whose memory is handed out by allocation rather than by
// offset: buffers for graphs (byte leases) and for Arrow (see the umaarrow
// package). Allocations are 64-byte aligned and zeroed. Pool memory has no
// source, so it is never marked preemptible; free chunks are given back to
// the kernel by Trim (and by [UMA.Shed]).
type Pool struct {
	a    *Arena
	free []extent        // sorted by offset, coalesced
	live map[int64]int64 // offset → size
	raw  int             // live AllocBytes allocations
	used int64           // bytes allocated
	wait chan struct{}   // closed when memory is freed
	// registered: the memory may be registered with a device; never trimmed
	// (until Unregister).
	registered atomic.Bool
}

// NewPool maps a pool of size bytes named name.
func (u *UMA) NewPool(name string, size int64, opts ArenaOptions) (*Pool, error) {
	if opts.Rehydrate != nil {
		return nil, fmt.Errorf("uma: pool %q: pools have no re-hydrate function", name)
	}
	if opts.Registered && opts.PreemptWithoutSource {
		return nil, fmt.Errorf("uma: pool %q: registered memory cannot be preempted (PreemptWithoutSource)", name)
	}
	p := &Pool{live: map[int64]int64{}}
	p.registered.Store(opts.Registered)
	a, err := u.newArena(name, size, opts, p)
	if err != nil {
		return nil, err
	}
	p.a = a
	p.free = []extent{{0, a.size / poolAlign * poolAlign}}
	return p, nil
}

// Region returns the pool's whole memory, for registration with a device or
// an io_uring ring (IORING_REGISTER_BUFFERS). Every buffer the pool hands
// out lies inside it. Only a pool made with ArenaOptions.Registered has one:
// any other pool may give its memory back to the kernel, which would break
// a registration.
func (p *Pool) Region() ([]byte, error) {
	if !p.registered.Load() {
		return nil, fmt.Errorf("uma: pool %q was not made with ArenaOptions.Registered, or was unregistered: its memory may be trimmed, so it must not be registered", p.a.name)
	}
	return p.a.mem[:p.a.size:p.a.size], nil
}

// Unregister declares that no new registration of the pool's memory will be
// made and that nothing registered writes into its free chunks any longer: from
// then on [Pool.Trim] and [Pool.ReleaseFree] give its free chunks back like any
// pool's, and [Pool.Region] fails. Call it once whoever registered the region
// writes only into the chunks it leased (a ring that still has the region
// registered keeps its pages pinned and charged until it unregisters, but
// without a mapping here once released). It reports whether the pool was
// registered until now.
func (p *Pool) Unregister() bool { return p.registered.Swap(false) }

// Arena is the pool's arena (for its ledger records and Close).
func (p *Pool) Arena() *Arena { return p.a }

// Close unmaps the pool; it fails while memory is allocated.
func (p *Pool) Close() error { return p.a.Close() }

// InUse is the number of bytes allocated.
func (p *Pool) InUse() int64 {
	p.a.u.mu.Lock()
	defer p.a.u.mu.Unlock()
	return p.used
}

func roundAlloc(n int64) int64 { return (n + poolAlign - 1) / poolAlign * poolAlign }

// allocLocked takes n (rounded) bytes first-fit; ok is false when no free
// extent is large enough.
func (p *Pool) allocLocked(n int64) (off int64, ok bool) {
	for k := range p.free {
		e := &p.free[k]
		if e.n < n {
			continue
		}
		off = e.off
		e.off += n
		e.n -= n
		if e.n == 0 {
			p.free = append(p.free[:k], p.free[k+1:]...)
		}
		p.live[off] = n
		p.used += n
		a := p.a
		lo, hi := int(off/a.chunkSize), int((off+n-1)/a.chunkSize)
		for i := lo; i <= hi; i++ {
			a.chunks[i].refs++
			if a.chunks[i].state == Evicted {
				_ = a.setLocked(i, Hot, "alloc")
			}
		}
		a.touchLocked(lo, hi, "alloc")
		a.u.bump()
		return off, true
	}
	return 0, false
}

// freeLocked returns the allocation at off to the free list and drops its
// chunk references.
func (p *Pool) freeLocked(off int64) {
	n, ok := p.live[off]
	if !ok {
		return
	}
	delete(p.live, off)
	p.used -= n
	a := p.a
	lo, hi := int(off/a.chunkSize), int((off+n-1)/a.chunkSize)
	for i := lo; i <= hi; i++ {
		a.chunks[i].refs--
	}
	k := sort.Search(len(p.free), func(k int) bool { return p.free[k].off > off })
	p.free = append(p.free, extent{})
	copy(p.free[k+1:], p.free[k:])
	p.free[k] = extent{off, n}
	if k+1 < len(p.free) && p.free[k].off+p.free[k].n == p.free[k+1].off {
		p.free[k].n += p.free[k+1].n
		p.free = append(p.free[:k+1], p.free[k+2:]...)
	}
	if k > 0 && p.free[k-1].off+p.free[k-1].n == p.free[k].off {
		p.free[k-1].n += p.free[k].n
		p.free = append(p.free[:k], p.free[k+1:]...)
	}
	if p.wait != nil {
		close(p.wait)
		p.wait = nil
	}
	a.u.bump()
}

// Alloc allocates n zeroed bytes as a byte lease. The budget (may be nil) is
// acquired first; when the pool is full Alloc waits for memory to be freed
// or ctx to end.
func (p *Pool) Alloc(ctx context.Context, n int, budget Budget) (*ByteLease, error) {
	a := p.a
	if n <= 0 || int64(n) > a.size {
		return nil, fmt.Errorf("uma: alloc of %d bytes from pool %q of %d bytes", n, a.name, a.size)
	}
	if budget != nil {
		if err := budget.Acquire(ctx, int64(n)); err != nil {
			return nil, fmt.Errorf("uma: alloc of %d bytes from pool %q: byte budget: %w", n, a.name, err)
		}
	}
	size := roundAlloc(int64(n))
	u := a.u
	u.mu.Lock()
	var off int64
	for {
		if err := a.checkOpenLocked("alloc"); err != nil {
			u.mu.Unlock()
			if budget != nil {
				budget.Release(int64(n))
			}
			return nil, err
		}
		var ok bool
		if off, ok = p.allocLocked(size); ok {
			break
		}
		if p.wait == nil {
			p.wait = make(chan struct{})
		}
		w := p.wait
		u.mu.Unlock()
		select {
		case <-w:
			u.mu.Lock()
		case <-ctx.Done():
			if budget != nil {
				budget.Release(int64(n))
			}
			return nil, fmt.Errorf("uma: alloc of %d bytes from pool %q (%d in use): %w", n, a.name, p.InUse(), ctx.Err())
		}
	}
	a.leases.bytes++
	u.leases.bytes++
	lo, hi := int(off/a.chunkSize), int((off+size-1)/a.chunkSize)
	u.mu.Unlock()
	l := &ByteLease{a: a, off: off, n: int64(n), lo: lo, hi: hi, budget: budget, alloc: true}
	l.refs.Store(1)
	clear(a.mem[off : off+size])
	return l, nil
}

// AllocBytes allocates n zeroed bytes without a lease or a budget, for
// adapters whose interface has no release object (the Arrow allocator). It
// does not wait: a full pool is an error. Free the bytes with FreeBytes.
func (p *Pool) AllocBytes(n int) ([]byte, error) {
	a := p.a
	if n <= 0 {
		return nil, fmt.Errorf("uma: alloc of %d bytes from pool %q", n, a.name)
	}
	size := roundAlloc(int64(n))
	a.u.mu.Lock()
	if err := a.checkOpenLocked("alloc"); err != nil {
		a.u.mu.Unlock()
		return nil, err
	}
	off, ok := p.allocLocked(size)
	if ok {
		p.raw++
	}
	used := p.used
	a.u.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("uma: alloc of %d bytes from pool %q: %w (%d of %d bytes in use)", n, a.name, ErrPoolFull, used, a.size)
	}
	b := a.mem[off : off+int64(n) : off+size]
	clear(b[:cap(b)])
	return b, nil
}

// ErrPoolFull: AllocBytes found no free extent large enough.
var ErrPoolFull = errors.New("uma: pool full")

// Contains reports whether b points into the pool's memory.
func (p *Pool) Contains(b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(p.a.mem)))
	ptr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return ptr >= base && ptr < base+uintptr(len(p.a.mem))
}

// FreeBytes frees memory returned by AllocBytes. b may be resliced from
// the front-most byte (b[:k]) but must start where the allocation started.
func (p *Pool) FreeBytes(b []byte) error {
	a := p.a
	if !p.Contains(b) {
		return fmt.Errorf("uma: free from pool %q: buffer is not pool memory", a.name)
	}
	off := int64(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(a.mem))))
	a.u.mu.Lock()
	defer a.u.mu.Unlock()
	if _, ok := p.live[off]; !ok {
		return fmt.Errorf("uma: free from pool %q: offset %d is not an allocation (double free?)", a.name, off)
	}
	p.freeLocked(off)
	p.raw--
	return nil
}

// Trim gives the pool's free chunks back to the kernel: madvise(MADV_FREE)
// (MADV_DONTNEED where MADV_FREE is refused) on every chunk without live
// allocations; they become EVICTED and are zeroed when allocated again
// (the zeroing write also cancels a pending lazy free). It returns the bytes
// trimmed. A registered pool (ArenaOptions.Registered) is never trimmed.
func (p *Pool) Trim() (int64, error) { return p.trim(false) }

// ReleaseFree gives the pool's free chunks back to the kernel at once:
// madvise(MADV_DONTNEED) on every chunk without live allocations, including
// chunks an earlier Trim left lazily freed (still charged to the cgroup until
// reclaim takes them). The cgroup's usage drops by what was resident before
// ReleaseFree returns. It returns the bytes of chunks that were HOT or COLD
// (those lazily freed before are released again but not counted twice). A
// registered pool is never released.
func (p *Pool) ReleaseFree() (int64, error) { return p.trim(true) }

func (p *Pool) trim(now bool) (int64, error) {
	a := p.a
	u := a.u
	u.mu.Lock()
	defer u.mu.Unlock()
	op := "trim"
	if now {
		op = "release"
	}
	if err := a.checkOpenLocked(op); err != nil {
		return 0, err
	}
	if p.registered.Load() {
		return 0, nil // registered memory must stay where the device pinned it
	}
	var n int64
	var errs []error
	for i := range a.chunks {
		if now && a.eligibleLocked(i, Evicted) {
			if err := u.k.madvise(a.span(i), adviseDontNeed); err != nil {
				errs = append(errs, fmt.Errorf("uma: release chunk %s: %w", a.id(i), err))
			}
			continue
		}
		if !a.eligibleLocked(i, Hot, Cold) {
			continue
		}
		var err error
		if now {
			err = u.k.madvise(a.span(i), adviseDontNeed)
		} else {
			_, err = u.lazyFree(a.span(i))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("uma: %s chunk %s: %w", op, a.id(i), err))
			continue
		}
		if err := a.setLocked(i, Evicted, op); err != nil {
			errs = append(errs, err)
			continue
		}
		n += a.chunkLen(i)
	}
	return n, errors.Join(errs...)
}

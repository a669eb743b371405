package uma

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Registration records in the ledger that a range of an arena is registered
// with a device (CUDA's cuMemHostRegister, an RDMA memory region). A device
// pins the pages as they are at registration: memory given back to the kernel
// afterwards (MADV_FREE, MADV_DONTNEED) would be replaced by fresh pages in the
// process while the device kept reading and writing the old ones. So while a
// registration lasts, no chunk it touches is marked preemptible, evicted,
// trimmed or shed, and the arena cannot be closed. Release it after the device
// has unregistered the memory.
//
// Devices look registrations up by address with [FindRegistration], so that
// they refuse memory that is not UMA arena memory recorded here (the Go heap,
// for one: the garbage collector may move or reuse it).
type Registration struct {
	a        *Arena
	off, n   int64
	lo, hi   int
	released atomic.Bool
}

// Bytes are the registered bytes; valid until Release.
func (r *Registration) Bytes() []byte { return r.a.mem[r.off : r.off+r.n : r.off+r.n] }

// Arena is the arena the bytes live in.
func (r *Registration) Arena() *Arena { return r.a }

// Offset is the registration's offset in its arena.
func (r *Registration) Offset() int64 { return r.off }

// Len is the number of registered bytes.
func (r *Registration) Len() int64 { return r.n }

// Register records [off, off+n) of the arena as registered with a device.
// The chunks are made resident and intact first (PREEMPTIBLE and EVICTED ones
// verified or re-hydrated), except that with overwrite the chunks the range
// covers entirely are not restored: the caller writes every byte of them
// before anything reads them (a staging buffer), so their old bytes do not
// matter and such chunks become HOT at once. Pools are refused: a pool is
// registered whole, with ArenaOptions.Registered and [Pool.Region].
func (a *Arena) Register(ctx context.Context, off, n int64, overwrite bool) (*Registration, error) {
	if a.pool != nil {
		return nil, fmt.Errorf("uma: register on pool %q: make the pool with ArenaOptions.Registered and register Pool.Region", a.name)
	}
	lo, hi, err := a.chunkRange(off, n)
	if err != nil {
		return nil, err
	}
	var covered func(i int) bool
	if overwrite {
		end := off + n
		covered = func(i int) bool {
			return int64(i)*a.chunkSize >= off && int64(i)*a.chunkSize+a.dataLen(i) <= end
		}
	}
	r := &Registration{a: a, off: off, n: n, lo: lo, hi: hi}
	err = a.acquire(ctx, acquireSpec{op: "register", lo: lo, hi: hi, overwritten: covered,
		check: func() error {
			for i := lo; i <= hi; i++ {
				if covered != nil && covered(i) && needsRestore(a.chunks[i].state) {
					// The pages may still be lazily freed: a write cancels that
					// (or faults in a zero page), so the kernel cannot take them
					// between here and the device's registration.
					touchPages(a.span(i), a.u.page)
				}
			}
			return nil
		},
		apply: func() error {
			for i := lo; i <= hi; i++ {
				a.chunks[i].regs++
			}
			a.touchLocked(lo, hi, "register")
			a.leases.registrations++
			a.u.leases.registrations++
			a.u.bump()
			return nil
		}})
	if err != nil {
		return nil, err
	}
	registry.add(r)
	return r, nil
}

// Release removes the registration from the ledger: its chunks may be
// preempted again. Call it only after the device unregistered the memory. A
// second Release is ignored.
func (r *Registration) Release() {
	if r.released.Swap(true) {
		return
	}
	registry.remove(r)
	u := r.a.u
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := r.lo; i <= r.hi; i++ {
		r.a.chunks[i].regs--
	}
	r.a.leases.registrations--
	u.leases.registrations--
	u.bump()
}

// registry indexes live registrations and open arenas by address, for
// [FindRegistration]. It is process-wide because a device is: any UMA's memory
// may be registered with it.
var registry regIndex

type regIndex struct {
	mu     sync.Mutex
	regs   map[*Registration]struct{}
	arenas map[*Arena]struct{}
}

func (x *regIndex) add(r *Registration) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.regs == nil {
		x.regs = map[*Registration]struct{}{}
	}
	x.regs[r] = struct{}{}
}

func (x *regIndex) remove(r *Registration) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.regs, r)
}

func (x *regIndex) addArena(a *Arena) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.arenas == nil {
		x.arenas = map[*Arena]struct{}{}
	}
	x.arenas[a] = struct{}{}
}

func (x *regIndex) removeArena(a *Arena) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.arenas, a)
}

func addrRange(b []byte) (lo, hi uintptr) {
	lo = uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return lo, lo + uintptr(len(b))
}

// FindRegistration returns the live registration whose bytes contain all of b.
// Memory that is not inside one is refused with an error that says what it is:
// UMA arena memory not registered in the ledger, or memory UMA does not own at
// all (the Go heap, C memory, another mapping). Devices call it before they
// register memory or copy from it asynchronously.
func FindRegistration(b []byte) (*Registration, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("uma: empty host range: nothing to register")
	}
	lo, hi := addrRange(b)
	registry.mu.Lock()
	defer registry.mu.Unlock()
	for r := range registry.regs {
		rlo, rhi := addrRange(r.Bytes())
		if lo >= rlo && hi <= rhi {
			return r, nil
		}
	}
	for a := range registry.arenas {
		alo, ahi := addrRange(a.mem)
		if lo >= alo && lo < ahi {
			return nil, fmt.Errorf("uma: host range [%d,%d) of arena %q is not inside a registration recorded with Arena.Register: "+
				"it could be preempted under the device", lo-alo, hi-alo, a.name)
		}
	}
	return nil, fmt.Errorf("uma: host range %#x (+%d bytes) is not UMA arena memory (the Go heap or another mapping): "+
		"only arena memory recorded with Arena.Register may be registered with a device or copied asynchronously", lo, len(b))
}

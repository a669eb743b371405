package uma

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/psiflow/psiflow/internal/addrspace"
)

// Policy is what happens to an arena's host copy once the device holds the
// data (TensorCast's post_gpu_load_policy), selectable per arena (per replica).
type Policy int

const (
	// PolicyEvictCPU drops the host copy at once (MADV_DONTNEED, tail first).
	PolicyEvictCPU Policy = iota
	// PolicyMarkPreemptible marks every eligible chunk preemptible: the kernel
	// takes the pages only if it needs them.
	PolicyMarkPreemptible
	// PolicyKeep keeps the host copy resident.
	PolicyKeep
)

// String returns the policy's name (EvictCPU, MarkPreemptible, Keep).
func (p Policy) String() string {
	switch p {
	case PolicyEvictCPU:
		return "EvictCPU"
	case PolicyMarkPreemptible:
		return "MarkPreemptible"
	case PolicyKeep:
		return "Keep"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ArenaOptions configures an arena.
type ArenaOptions struct {
	// ChunkSize overrides the UMA's chunk size (a multiple of the page size).
	ChunkSize int64
	// Rehydrate re-reads a chunk from its source. With it, a new arena's chunks
	// start EVICTED and are read in on first use (lazily); without it they
	// start HOT (zero bytes, to be filled with Write) and a chunk whose bytes
	// were reclaimed cannot be served: ErrNoRehydrate.
	Rehydrate RehydrateFunc
	// Policy is the post-GPU-load policy (default PolicyEvictCPU).
	Policy Policy
	// PreemptWithoutSource lets MarkPreemptible, EvictTail and PostGPULoad
	// take chunks that have no re-hydrate function, accepting that their bytes
	// may be lost (a cache that can be rebuilt some other way). By default
	// such chunks are skipped: preemption never loses data it cannot re-read.
	PreemptWithoutSource bool
	// NoHugePages skips the MADV_HUGEPAGE hint. By default arenas ask for
	// transparent huge pages: far fewer TLB misses when a re-acquire touches
	// and hashes a whole chunk. The hint is advisory; errors are ignored.
	NoHugePages bool
	// Registered declares that the pool's memory will be registered with a
	// device or an io_uring ring (see [Pool.Region]). Registration pins the
	// pages as they are at that moment: memory given back to the kernel
	// afterwards (MADV_FREE or MADV_DONTNEED) would be replaced by fresh pages
	// in the process while the device kept writing into the old ones. So a
	// registered pool is never trimmed or shed. Pools only.
	Registered bool
}

type chunk struct {
	state      State
	version    uint64
	lastAccess int64
	refs       int32 // byte leases and pool allocations
	pins       int32
	stables    int32
	txs        int32
	regs       int32 // device registrations (see Registration)
	mlocked    bool
	hasSum     bool
	sum        uint64 // xxh3 of the chunk taken just before MADV_FREE
	busy       chan struct{}
	rehydrate  RehydrateFunc
}

// Arena is one mmap(MAP_PRIVATE|MAP_ANONYMOUS) region cut into chunks, for one
// artifact (a dataset shard, a replica). Addresses are stable for the arena's
// life. Its bytes are reached only through leases, so that the ledger always
// knows who uses them.
type Arena struct {
	u         *UMA
	name      string
	mem       []byte // page-rounded mapping
	size      int64  // logical size
	chunkSize int64
	chunks    []chunk
	policy    atomic.Int32
	pool      *Pool
	closed    bool
	leases    leaseCounts
	fn        RehydrateFunc
	lossy     bool // ArenaOptions.PreemptWithoutSource
}

// NewArena maps size bytes for the artifact name (unique in this UMA).
func (u *UMA) NewArena(name string, size int64, opts ArenaOptions) (*Arena, error) {
	if opts.Registered {
		return nil, fmt.Errorf("uma: arena %q: only pools can be registered (ArenaOptions.Registered)", name)
	}
	return u.newArena(name, size, opts, nil)
}

func (u *UMA) newArena(name string, size int64, opts ArenaOptions, pool *Pool) (*Arena, error) {
	if size <= 0 {
		return nil, fmt.Errorf("uma: arena %q: size %d must be positive", name, size)
	}
	cs := opts.ChunkSize
	if cs == 0 {
		cs = u.cfg.ChunkSize
	}
	if cs <= 0 || cs%int64(u.page) != 0 {
		return nil, fmt.Errorf("uma: arena %q: chunk size %d is not a positive multiple of the page size %d", name, cs, u.page)
	}
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil, fmt.Errorf("uma: arena %q: %w", name, ErrClosed)
	}
	if _, dup := u.arenas[name]; dup {
		u.mu.Unlock()
		return nil, fmt.Errorf("uma: arena %q already exists", name)
	}
	u.arenas[name] = nil // reserve the name while mapping
	u.mu.Unlock()

	mapped := (size + int64(u.page) - 1) / int64(u.page) * int64(u.page)
	// Under a virtual-memory limit the mapping must leave the Go runtime room to
	// grow its heap and start threads: past it, the runtime dies with a fatal error.
	st, err := addrspace.Current()
	if err == nil {
		err = st.Fit(fmt.Sprintf("uma: arena %q", name), mapped)
	}
	var mem []byte
	if err == nil {
		mem, err = u.k.mmap(int(mapped))
	}
	if err != nil {
		u.mu.Lock()
		delete(u.arenas, name)
		u.mu.Unlock()
		var fe *addrspace.FitError
		if errors.As(err, &fe) {
			return nil, err // names the arena already
		}
		return nil, fmt.Errorf("uma: arena %q: %w", name, err)
	}
	if !opts.NoHugePages {
		_ = u.k.madvise(mem, adviseHugePage) // advisory: THP may be off
	}
	a := &Arena{u: u, name: name, mem: mem, size: size, chunkSize: cs, pool: pool, fn: opts.Rehydrate, lossy: opts.PreemptWithoutSource}
	a.policy.Store(int32(opts.Policy))
	a.chunks = make([]chunk, (mapped+cs-1)/cs)
	now := u.now()
	for i := range a.chunks {
		a.chunks[i].lastAccess = now
		if opts.Rehydrate != nil {
			a.chunks[i].state = Evicted
		}
	}
	u.mu.Lock()
	u.arenas[name] = a
	u.order = append(u.order, a)
	u.bump()
	u.mu.Unlock()
	registry.addArena(a)
	return a, nil
}

// Name is the arena's artifact name.
func (a *Arena) Name() string { return a.name }

// Size is the arena's size in bytes.
func (a *Arena) Size() int64 { return a.size }

// ChunkSize is the arena's chunk size.
func (a *Arena) ChunkSize() int64 { return a.chunkSize }

// Chunks is the number of chunks.
func (a *Arena) Chunks() int { return len(a.chunks) }

// SetPolicy selects the post-GPU-load policy.
func (a *Arena) SetPolicy(p Policy) { a.policy.Store(int32(p)) }

// SetRehydrate registers a re-hydrate function for one chunk, overriding the
// arena's.
func (a *Arena) SetRehydrate(index int, fn RehydrateFunc) error {
	a.u.mu.Lock()
	defer a.u.mu.Unlock()
	if index < 0 || index >= len(a.chunks) {
		return fmt.Errorf("uma: arena %q: chunk %d out of range [0,%d)", a.name, index, len(a.chunks))
	}
	a.chunks[index].rehydrate = fn
	return nil
}

func (a *Arena) id(i int) ChunkID { return ChunkID{a.name, i} }

// sourcedLocked says whether chunk i may lose its bytes: it has a re-hydrate
// function, or the arena accepts the loss.
func (a *Arena) sourcedLocked(i int) bool {
	return a.lossy || a.fn != nil || a.chunks[i].rehydrate != nil
}

// span is chunk i's bytes in the mapping (page-rounded at the end).
func (a *Arena) span(i int) []byte {
	lo := int64(i) * a.chunkSize
	hi := min(lo+a.chunkSize, int64(len(a.mem)))
	return a.mem[lo:hi:hi]
}

// chunkLen is len(span(i)).
func (a *Arena) chunkLen(i int) int64 {
	lo := int64(i) * a.chunkSize
	return min(lo+a.chunkSize, int64(len(a.mem))) - lo
}

// dataLen is the length of chunk i's logical bytes (the part below Size).
func (a *Arena) dataLen(i int) int64 {
	lo := int64(i) * a.chunkSize
	return min(lo+a.chunkSize, a.size) - lo
}

func (a *Arena) chunkRange(off, n int64) (lo, hi int, err error) {
	if off < 0 || n <= 0 || off+n > a.size || off+n < off {
		return 0, 0, fmt.Errorf("uma: arena %q: range [%d,%d) outside [0,%d)", a.name, off, off+n, a.size)
	}
	return int(off / a.chunkSize), int((off + n - 1) / a.chunkSize), nil
}

// setLocked moves chunk i to state to, refusing edges not in Transitions.
func (a *Arena) setLocked(i int, to State, op string) error {
	c := &a.chunks[i]
	if c.state == to {
		return nil
	}
	if !Allowed(c.state, to) {
		return &TransitionError{Chunk: a.id(i), From: c.state, To: to, Op: op}
	}
	c.state = to
	c.version++
	a.u.bump()
	return nil
}

func (a *Arena) checkOpenLocked(op string) error {
	if a.closed || a.u.closed {
		return fmt.Errorf("uma: %s on arena %q: %w", op, a.name, ErrClosed)
	}
	return nil
}

// claimLocked waits until chunks lo..hi are idle and marks them busy, so that
// the slow work on them (hashing, madvise, re-hydration) runs without u.mu.
// u.mu is held on entry and on return.
func (a *Arena) claimLocked(ctx context.Context, lo, hi int, op string) error {
	for {
		if err := a.checkOpenLocked(op); err != nil {
			return err
		}
		var wait chan struct{}
		for i := lo; i <= hi; i++ {
			if a.chunks[i].busy != nil {
				wait = a.chunks[i].busy
				break
			}
		}
		if wait == nil {
			break
		}
		a.u.mu.Unlock()
		select {
		case <-wait:
			a.u.mu.Lock()
		case <-ctx.Done():
			a.u.mu.Lock()
			return fmt.Errorf("uma: %s on arena %q: waiting for chunks %d..%d: %w", op, a.name, lo, hi, ctx.Err())
		}
	}
	for i := lo; i <= hi; i++ {
		a.chunks[i].busy = make(chan struct{})
	}
	return nil
}

func (a *Arena) unclaimLocked(lo, hi int) {
	for i := lo; i <= hi; i++ {
		if b := a.chunks[i].busy; b != nil {
			close(b)
			a.chunks[i].busy = nil
		}
	}
}

// touchLocked records an access of chunks lo..hi: COLD chunks become HOT.
func (a *Arena) touchLocked(lo, hi int, op string) {
	now := a.u.now()
	for i := lo; i <= hi; i++ {
		a.chunks[i].lastAccess = now
		if a.chunks[i].state == Cold {
			_ = a.setLocked(i, Hot, op)
		}
	}
}

// Hydrate makes the range resident and intact now (re-hydrating EVICTED
// chunks, verifying PREEMPTIBLE ones), without taking a lease.
func (a *Arena) Hydrate(ctx context.Context, off, n int64) error {
	if a.pool != nil {
		return fmt.Errorf("uma: hydrate pool %q: pool memory has no source", a.name)
	}
	lo, hi, err := a.chunkRange(off, n)
	if err != nil {
		return err
	}
	return a.acquire(ctx, acquireSpec{op: "hydrate", lo: lo, hi: hi, apply: func() error {
		a.touchLocked(lo, hi, "hydrate")
		return nil
	}})
}

// Write copies p into the arena at off. Chunks that p covers only in part are
// made resident and intact first; the written chunks become HOT (a GPU copy
// of them is now stale). Writing a chunk in a transfer (LOCKED_TX) is refused.
func (a *Arena) Write(ctx context.Context, off int64, p []byte) error {
	if a.pool != nil {
		return fmt.Errorf("uma: write to pool %q: pools hand out memory through Alloc", a.name)
	}
	lo, hi, err := a.chunkRange(off, int64(len(p)))
	if err != nil {
		return err
	}
	end := off + int64(len(p))
	covered := func(i int) bool {
		return int64(i)*a.chunkSize >= off && int64(i)*a.chunkSize+a.dataLen(i) <= end
	}
	u := a.u
	// Claim, restore partial chunks, then copy without the lock.
	err = a.acquire(ctx, acquireSpec{op: "write", lo: lo, hi: hi, claim: true, overwritten: covered,
		check: func() error {
			for i := lo; i <= hi; i++ {
				if a.chunks[i].txs > 0 {
					return fmt.Errorf("uma: write to chunk %s refused while a transfer reads it (%s): %w", a.id(i), LockedTx, ErrLeased)
				}
			}
			return nil
		},
		apply: func() error { return nil }, keep: true})
	if err != nil {
		return err
	}
	copy(a.mem[off:end], p)
	u.mu.Lock()
	defer u.mu.Unlock()
	var errs []error
	for i := lo; i <= hi; i++ {
		c := &a.chunks[i]
		c.hasSum = false
		if c.state == Cold || c.state == CopiedGPU {
			errs = append(errs, a.setLocked(i, Hot, "write"))
		}
		c.version++
	}
	a.touchLocked(lo, hi, "write")
	u.bump()
	a.unclaimLocked(lo, hi)
	return errors.Join(errs...)
}

// RecordAccess notes that the range was used (for example read by the device)
// so that preemption picks colder chunks first: COLD chunks become HOT.
func (a *Arena) RecordAccess(off, n int64) error {
	lo, hi, err := a.chunkRange(off, n)
	if err != nil {
		return err
	}
	a.u.mu.Lock()
	defer a.u.mu.Unlock()
	a.touchLocked(lo, hi, "access")
	return nil
}

// Cool moves HOT chunks without leases that were not accessed for idle to
// COLD, and returns how many moved.
func (a *Arena) Cool(idle time.Duration) int {
	a.u.mu.Lock()
	defer a.u.mu.Unlock()
	cut := a.u.now() - int64(idle)
	n := 0
	for i := range a.chunks {
		c := &a.chunks[i]
		if c.state == Hot && c.busy == nil && c.refs == 0 && c.pins == 0 && c.lastAccess <= cut {
			if a.setLocked(i, Cold, "cool") == nil {
				n++
			}
		}
	}
	return n
}

func (a *Arena) leasedLocked() error {
	l := a.leases
	raw := 0
	if a.pool != nil {
		raw = a.pool.raw
	}
	if l.bytes+l.pins+l.stables+l.transfers+l.registrations+raw == 0 {
		return nil
	}
	if raw > 0 {
		return fmt.Errorf("%w: pool %q holds %d byte leases and %d raw allocations", ErrLeased, a.name, l.bytes, raw)
	}
	return fmt.Errorf("%w: arena %q holds %d byte, %d pin, %d stable and %d transfer leases and %d device registrations",
		ErrLeased, a.name, l.bytes, l.pins, l.stables, l.transfers, l.registrations)
}

// Close unmaps the arena. It fails while leases are outstanding or an
// operation is in progress.
func (a *Arena) Close() error {
	u := a.u
	u.mu.Lock()
	if a.closed {
		u.mu.Unlock()
		return nil
	}
	if err := a.leasedLocked(); err != nil {
		u.mu.Unlock()
		return fmt.Errorf("uma: close: %w", err)
	}
	for i := range a.chunks {
		if a.chunks[i].busy != nil {
			u.mu.Unlock()
			return fmt.Errorf("uma: close arena %q: an operation on chunk %d is in progress", a.name, i)
		}
	}
	a.closed = true
	delete(u.arenas, a.name)
	for i, x := range u.order {
		if x == a {
			u.order = append(u.order[:i], u.order[i+1:]...)
			break
		}
	}
	u.bump()
	u.mu.Unlock()
	registry.removeArena(a)
	if err := u.k.munmap(a.mem); err != nil {
		return fmt.Errorf("uma: close arena %q: %w", a.name, err)
	}
	return nil
}

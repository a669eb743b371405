package source

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Align is the alignment of buffers from [Pool] and of O_DIRECT reads: 4096
// bytes covers every logical block size in common use.
const Align = 4096

// Buffer is memory a read lands in. Release returns it to its provider; call it once.
type Buffer interface {
	// Bytes returns the buffer's memory; its capacity may exceed the length asked for.
	Bytes() []byte
	// Release gives the memory back. The bytes must not be used afterwards.
	Release()
}

// BufferProvider hands out aligned, reusable buffers. A Reader registers the
// provider's Regions with each io_uring ring once, so reads into buffers that
// lie inside them use READ_FIXED. The UMA package can satisfy this interface
// with a thin adapter over its leases.
type BufferProvider interface {
	// Alloc returns a buffer of at least n bytes, waiting for a free one until ctx ends.
	Alloc(ctx context.Context, n int) (Buffer, error)
	// Regions returns the memory to register with io_uring (may be empty).
	// Every buffer Alloc returns lies inside one region unless it is an overflow buffer.
	Regions() [][]byte
}

// Revocable is a [BufferProvider] that may ask the readers which registered its
// Regions with their rings to unregister them before the readers close (a paused
// loader giving its pinned memory back within an epoch). A reader of
// [Files.Samples] whose ring registered the regions waits until Revoked is
// closed and no read of its is in flight, unregisters the ring's buffers and calls
// Unregistered; it goes on reading into the provider's buffers, without fixed
// buffers. Regions should return nothing once revoked, so that a reader made
// later does not register them.
type Revocable interface {
	BufferProvider
	// Revoked returns a channel closed once the regions are to be unregistered;
	// nil while there is nothing to revoke.
	Revoked() <-chan struct{}
	// Unregistered is called once by each reader that unregistered the regions
	// after Revoked was closed.
	Unregistered()
}

// ErrClosed is returned by operations on a closed Pool or Reader.
var ErrClosed = errors.New("source: closed")

// Pool is the default [BufferProvider]: one mmap'd region cut into equal,
// page-aligned slots, registered once with every ring. Requests larger than a
// slot get a separate aligned mapping that is not registered (counted in
// [PoolStats.Oversize]). Pool is safe for concurrent use.
type Pool struct {
	mem       []byte
	slotSize  int
	slots     []poolBuffer
	free      chan *poolBuffer
	closed    atomic.Bool
	unmapOnce sync.Once
	inUse     atomic.Int64
	oversize  atomic.Int64
	overflow  atomic.Int64
	grow      atomic.Bool
}

type poolBuffer struct {
	p        *Pool
	b        []byte
	full     []byte // the whole slot
	released atomic.Bool
	own      bool // separately mapped (oversize)
}

func (b *poolBuffer) Bytes() []byte { return b.b }

func (b *poolBuffer) Release() {
	if !b.released.CompareAndSwap(false, true) {
		return
	}
	if b.own {
		unmapAligned(b.b)
	} else {
		b.p.free <- b
	}
	if b.p.inUse.Add(-1) == 0 && b.p.closed.Load() {
		b.p.unmap()
	}
}

// PoolStats are a pool's counters.
type PoolStats struct {
	// Slots and SlotSize describe the registered region.
	Slots, SlotSize int
	// InUse is the number of buffers handed out and not yet released.
	InUse int64
	// Oversize counts allocations larger than a slot (separately mapped, not registered).
	Oversize int64
	// Overflow counts allocations made while every slot was in use (with [Pool.SetOverflow]).
	Overflow int64
}

// NewPool maps slots buffers of slotSize bytes each (rounded up to [Align]).
func NewPool(slots, slotSize int) (*Pool, error) {
	if slots <= 0 || slotSize <= 0 {
		return nil, fmt.Errorf("source: pool of %d slots × %d bytes: sizes must be positive", slots, slotSize)
	}
	slotSize = roundUp(slotSize, Align)
	mem, err := mapAligned(slots * slotSize)
	if err != nil {
		return nil, fmt.Errorf("source: pool of %d slots × %d bytes: %w", slots, slotSize, err)
	}
	p := &Pool{mem: mem, slotSize: slotSize, slots: make([]poolBuffer, slots), free: make(chan *poolBuffer, slots)}
	for i := range p.slots {
		s := &p.slots[i]
		s.p = p
		s.full = mem[i*slotSize : (i+1)*slotSize : (i+1)*slotSize]
		s.released.Store(true)
		p.free <- s
	}
	return p, nil
}

// Alloc returns a buffer whose length is n and capacity is n rounded up to
// [Align] (room for an aligned O_DIRECT tail read).
func (p *Pool) Alloc(ctx context.Context, n int) (Buffer, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if n < 0 {
		return nil, fmt.Errorf("source: alloc of %d bytes", n)
	}
	if roundUp(n, Align) > p.slotSize {
		p.oversize.Add(1)
		return p.separate(n)
	}
	take := func(s *poolBuffer) Buffer {
		s.released.Store(false)
		s.b = s.full[:n:roundUp(max(n, 1), Align)]
		p.inUse.Add(1)
		return s
	}
	if p.grow.Load() {
		select {
		case s := <-p.free:
			return take(s), nil
		default:
			p.overflow.Add(1)
			return p.separate(n)
		}
	}
	select {
	case s := <-p.free:
		return take(s), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("source: waiting for a %d-byte buffer: %w", n, context.Cause(ctx))
	}
}

// separate maps a buffer of its own (not registered with any ring).
func (p *Pool) separate(n int) (Buffer, error) {
	mem, err := mapAligned(roundUp(max(n, 1), Align))
	if err != nil {
		return nil, fmt.Errorf("source: separate buffer of %d bytes: %w", n, err)
	}
	p.inUse.Add(1)
	return &poolBuffer{p: p, b: mem[:n:len(mem)], own: true}, nil
}

// SetOverflow chooses what Alloc does when every slot is in use: wait for
// one (false, the default: the pool bounds memory) or map a separate,
// unregistered buffer (true: something else, such as a byte budget, bounds
// memory). Overflow avoids a hang when a consumer holds more elements than
// the pool has slots, for instance a batch stage collecting a large batch.
func (p *Pool) SetOverflow(on bool) { p.grow.Store(on) }

// ReleaseFree gives the pages of the slots free now back to the kernel
// (MADV_DONTNEED) and returns their bytes; a later Alloc of such a slot
// faults in zeroed pages. A ring that registered the pool must have
// unregistered it first: pinned pages stay charged whatever the mapping says.
func (p *Pool) ReleaseFree() (int64, error) {
	if p.closed.Load() {
		return 0, ErrClosed
	}
	var taken []*poolBuffer
	defer func() {
		for _, s := range taken {
			p.free <- s
		}
	}()
	var n int64
	for {
		select {
		case s := <-p.free:
			taken = append(taken, s)
			if err := dropPages(s.full); err != nil {
				return n, fmt.Errorf("source: release free slots: %w", err)
			}
			n += int64(len(s.full))
		default:
			return n, nil
		}
	}
}

// Regions returns the single registered region.
func (p *Pool) Regions() [][]byte { return [][]byte{p.mem} }

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	return PoolStats{Slots: len(p.slots), SlotSize: p.slotSize, InUse: p.inUse.Load(), Oversize: p.oversize.Load(), Overflow: p.overflow.Load()}
}

// Close stops allocation and unmaps the pool once every buffer handed out
// has been released (at once when none is in use).
func (p *Pool) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return nil
	}
	if p.inUse.Load() == 0 {
		p.unmap()
	}
	return nil
}

// unmap releases the region exactly once.
func (p *Pool) unmap() {
	p.unmapOnce.Do(func() { unmapAligned(p.mem) })
}

func roundUp(n, a int) int { return (n + a - 1) / a * a }

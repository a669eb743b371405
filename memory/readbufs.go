package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/uma"
)

// ReadBuffers is the elastic read-buffer provider: a small UMA pool registered with
// every io_uring ring (sized to the reads in flight, not to the budget) and a spill
// pool that is not registered, so its free chunks can go back to the kernel. Reads
// go to the registered pool while it has room and pressure is off; else to the spill
// pool. Registered memory stays pinned and charged until the rings unregister it,
// which happens when an epoch's readers close, or earlier when [ReadBuffers.Revoke]
// asks them to (a paused loader: see [source.Revocable]): [ReadBuffers.NextEpoch]
// then re-registers a smaller pool after an epoch with pressure, and the full size
// after an epoch without.
type ReadBuffers struct {
	u       *uma.UMA
	want    int64 // registered size without pressure
	minimum int64 // smallest registered size (0: none)

	mu   sync.Mutex
	reg  *uma.Pool // may be nil (registered size 0)
	size int64
	// revoke is closed by Revoke (a new one per registered pool); revoked says
	// so without the lock. Once revoked, no read goes to the registered pool
	// until the next epoch's pool.
	revoke       chan struct{}
	revoked      atomic.Bool
	unregistered atomic.Int64 // readers that unregistered after a Revoke, in all

	spill    *uma.Pool
	spilling atomic.Bool // pressure: new reads go to the spill pool
	pressed  atomic.Bool // pressure seen this epoch
	spilled  atomic.Int64
}

var _ source.Revocable = (*ReadBuffers)(nil)

// newReadBuffers maps a registered pool of registered bytes and a spill pool of
// spill bytes in u.
func newReadBuffers(u *uma.UMA, registered, spill int64) (*ReadBuffers, error) {
	r := &ReadBuffers{u: u, want: registered, minimum: min(registered, u.ChunkSize())}
	var err error
	if r.spill, err = u.NewPool("read-spill", spill, uma.ArenaOptions{}); err != nil {
		return nil, fmt.Errorf("memory: read spill pool: %w", err)
	}
	if err := r.register(registered); err != nil {
		r.spill.Close()
		return nil, err
	}
	return r, nil
}

// register replaces the registered pool by one of n bytes (none for 0); mu held or
// not yet shared.
func (r *ReadBuffers) register(n int64) error {
	if r.reg != nil {
		if err := r.reg.Close(); err != nil {
			return fmt.Errorf("memory: closing the registered read pool: %w", err)
		}
		r.reg, r.size = nil, 0
	}
	r.revoke = make(chan struct{})
	r.revoked.Store(false)
	if n <= 0 {
		return nil
	}
	p, err := r.u.NewPool("read-registered", n, uma.ArenaOptions{Registered: true})
	if err != nil {
		return fmt.Errorf("memory: registered read pool of %d bytes: %w", n, err)
	}
	r.reg, r.size = p, p.Arena().Size()
	return nil
}

// Alloc leases a buffer of at least n bytes (rounded up to source.Align).
func (r *ReadBuffers) Alloc(ctx context.Context, n int) (source.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("memory: read buffer of %d bytes", n)
	}
	size := (max(n, 1) + source.Align - 1) / source.Align * source.Align
	if !r.spilling.Load() && !r.revoked.Load() {
		r.mu.Lock()
		reg, regSize := r.reg, r.size
		r.mu.Unlock()
		if reg != nil && int64(size) <= regSize && !r.revoked.Load() {
			if l, err := reg.Alloc(doneCtx, size, nil); err == nil {
				return buffer{l: l, n: n}, nil
			}
		}
	}
	r.spilled.Add(1)
	l, err := r.spill.Alloc(ctx, size, nil)
	if err != nil {
		return nil, fmt.Errorf("memory: read buffer of %d bytes: %w", n, err)
	}
	return buffer{l: l, n: n}, nil
}

// doneCtx makes a pool Alloc fail at once instead of waiting when the pool is full.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// Regions returns the registered pool's memory (none when its size is 0 or it was
// revoked).
func (r *ReadBuffers) Regions() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reg == nil || r.revoked.Load() {
		return nil
	}
	region, err := r.reg.Region()
	if err != nil {
		return nil
	}
	return [][]byte{region}
}

// Registered returns the registered pool's size in bytes (0 once revoked).
func (r *ReadBuffers) Registered() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.revoked.Load() {
		return 0
	}
	return r.size
}

// Spilled returns how many buffers came from the spill pool.
func (r *ReadBuffers) Spilled() int64 { return r.spilled.Load() }

// SetPressure sends new reads to the spill pool (on) or back to the registered one.
func (r *ReadBuffers) SetPressure(on bool) {
	r.spilling.Store(on)
	if on {
		r.pressed.Store(true)
	}
}

// ReleaseSpill gives the spill pool's free chunks back to the kernel at once, and
// the registered pool's once it was revoked.
func (r *ReadBuffers) ReleaseSpill() (int64, error) {
	n, err := r.spill.ReleaseFree()
	if r.revoked.Load() {
		r.mu.Lock()
		if r.reg != nil {
			m, rerr := r.reg.ReleaseFree()
			n, err = n+m, errors.Join(err, rerr)
		}
		r.mu.Unlock()
	}
	return n, err
}

// Revoke asks the readers to unregister the registered pool now instead of when
// the epoch's readers close (a paused loader giving its pinned memory back): it
// closes the channel [ReadBuffers.Revoked] returns, sends every read to the spill
// pool until the next epoch, and lets [ReadBuffers.ReleaseSpill] give the
// registered pool's free chunks back. No read writes into them any longer: the
// readers only read into buffers they lease, and none is leased from the pool
// from now on. A ring keeps the pool pinned and charged until its reader
// unregisters it, which it does once none of its reads is in flight. It reports
// whether there was a registered pool to revoke (false when already revoked).
func (r *ReadBuffers) Revoke() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reg == nil || r.revoked.Load() {
		return false
	}
	r.revoked.Store(true)
	r.reg.Unregister()
	close(r.revoke)
	return true
}

// Revoked returns the channel [ReadBuffers.Revoke] closes for the registered pool
// of this epoch (nil when none is registered): see [source.Revocable].
func (r *ReadBuffers) Revoked() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reg == nil {
		return nil
	}
	return r.revoke
}

// Unregistered counts a reader that unregistered the pool after a Revoke
// ([source.Revocable]).
func (r *ReadBuffers) Unregistered() { r.unregistered.Add(1) }

// Unregistrations returns how many readers unregistered the pool after a Revoke,
// in all epochs.
func (r *ReadBuffers) Unregistrations() int64 { return r.unregistered.Load() }

// NextEpoch resizes the registered pool between epochs, once no reader holds it:
// half its size after an epoch with pressure (down to one chunk), the full size
// after one without; a pool revoked in the epoch is replaced by a new one. It returns the bytes unregistered (positive) or registered
// anew (negative). It fails if a buffer of the registered pool is still leased.
func (r *ReadBuffers) NextEpoch() (int64, error) {
	pressed := r.pressed.Swap(r.spilling.Load())
	r.mu.Lock()
	defer r.mu.Unlock()
	target := r.want
	if pressed {
		target = max(r.minimum, r.size/2)
	}
	if !r.revoked.Load() && (target == r.size || (r.reg != nil && target > r.size && r.size >= r.want)) {
		return 0, nil
	}
	before := r.size
	if err := r.register(target); err != nil {
		return 0, err
	}
	return before - r.size, nil
}

// Close closes both pools; it fails while a buffer is leased.
func (r *ReadBuffers) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	if r.reg != nil {
		err = r.reg.Close()
		r.reg = nil
	}
	if cerr := r.spill.Close(); err == nil {
		err = cerr
	}
	return err
}

// buffer is a byte lease seen as a source.Buffer.
type buffer struct {
	l *uma.ByteLease
	n int
}

func (b buffer) Bytes() []byte {
	full := b.l.Bytes()
	return full[:b.n:len(full)]
}

func (b buffer) Release() { b.l.Release() }

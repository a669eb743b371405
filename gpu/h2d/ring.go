package h2d

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/uma"
)

// AfterCopy is what happens to a staging slot once its copy completed and
// the ring has more slots registered than it needs (see [Ring]): the
// post-GPU policy of UMA, per slot.
type AfterCopy string

// The after-copy policies.
const (
	// Preemptible unregisters the slot and marks it PREEMPTIBLE
	// (MADV_FREE): the kernel takes its pages only if it needs them, and
	// the next batch staged there overwrites it (the default).
	Preemptible AfterCopy = "preemptible"
	// Evict unregisters the slot and gives its pages back at once
	// (MADV_DONTNEED): EVICTED.
	Evict AfterCopy = "evict"
	// Keep keeps every slot registered and resident (COPIED_GPU).
	Keep AfterCopy = "keep"
)

// Config configures a [Ring].
type Config struct {
	// UMA owns the ring's arena; Device is where batches are copied.
	UMA    *uma.UMA
	Device gpu.Device
	// Name names the arena (default "gpu-staging"; unique in the UMA).
	Name string
	// SlotBytes is the largest batch in bytes; each slot is that, rounded
	// up to the page size.
	SlotBytes int64
	// Budget sizes the ring: Budget/slot slots (at least 2). Slots, when
	// positive, overrides it.
	Budget int64
	Slots  int
	// KeepRegistered is the fewest slots kept registered with the device
	// (default 2). Beyond it the ring keeps as many registered as it had
	// in use at once over its last Window acquisitions, so that steady
	// streaming registers nothing; a slot returned beyond both follows
	// AfterCopy.
	KeepRegistered int
	// Window is the number of recent acquisitions whose peak of slots in use
	// the ring keeps registered (default four times the slots, at least 32).
	Window int
	// AfterCopy is the post-copy policy (default Preemptible).
	AfterCopy AfterCopy
	// DeviceBytes is the device memory quota for batches on the device
	// (default: one slot per ring slot, at most half the device's free
	// memory). A copy waits while it is full.
	DeviceBytes int64
	// Streams is the number of copy streams used in turn (default 2: the
	// copy of one batch runs while the next is staged and enqueued).
	Streams int
}

// Ring is a ring of staging slots in one UMA arena, registered with a device
// slot by slot when first used and kept registered while the ring streams,
// plus the device side of the copies: streams used in turn, events, and a
// pool of device buffers under a [Quota]. Batches are collated straight into
// a slot ([Ring.Acquire]), copied asynchronously ([Slot.Copy]), and the slot
// comes back once the copy completed ([Slot.Finish]).
//
// Registered memory is never madvised: a slot that follows AfterCopy is
// unregistered from the device and in the ledger first, then marked.
type Ring struct {
	cfg   Config
	slot  int64 // bytes per slot (page-rounded)
	arena *uma.Arena
	quota *Quota

	streams []gpu.Stream

	mu       sync.Mutex
	slots    []*slotState
	regFree  []*slotState // free and registered (LIFO: the warmest first)
	coldFree []*slotState // free and not registered
	inUse    int
	nreg     int   // slots registered now
	window   []int // slots in use after each of the last Window acquisitions
	wpos     int
	wake     chan struct{}
	err      error // the first failure of background work (Finish from Release)
	next     int   // the next stream
	events   []gpu.Event
	bufs     []gpu.Ptr // free device buffers (slot-sized)
	bufWake  chan struct{}
	nbufs    int // device buffers allocated
	closed   bool
	stats    RingStats
}

type slotState struct {
	i   int
	off int64
	reg *uma.Registration // nil while not registered
}

// RingStats counts what the ring did.
type RingStats struct {
	// Slots is the ring's size; InUse the slots holding a batch now.
	Slots, InUse int
	// Registered is the slots registered with the device now.
	Registered int
	// Registrations and Unregistrations count device registrations of slots.
	Registrations, Unregistrations int64
	// Marked and Evicted count slots given back per AfterCopy; Kept the
	// returns that stayed registered.
	Marked, Evicted, Kept int64
	// Copies and CopyBytes count host-to-device copies.
	Copies, CopyBytes int64
	// DeviceBuffers is the device buffers allocated.
	DeviceBuffers int
}

// NewRing maps the ring's arena (no memory is touched until a slot is used)
// and opens its streams.
func NewRing(cfg Config) (*Ring, error) {
	if cfg.UMA == nil || cfg.Device == nil {
		return nil, errors.New("gpu staging ring: Config.UMA and Config.Device are required")
	}
	if cfg.SlotBytes <= 0 {
		return nil, fmt.Errorf("gpu staging ring: slot size %d must be positive (the largest batch in bytes)", cfg.SlotBytes)
	}
	page := int64(os.Getpagesize())
	slot := (cfg.SlotBytes + page - 1) / page * page
	if cfg.Name == "" {
		cfg.Name = "gpu-staging"
	}
	if cfg.Slots <= 0 {
		if cfg.Budget < 2*slot {
			return nil, fmt.Errorf("gpu staging ring %q: the budget of %d bytes holds fewer than two staging slots of %d bytes (a batch); raise the budget or shrink the batch", cfg.Name, cfg.Budget, slot)
		}
		cfg.Slots = int(min(cfg.Budget/slot, 1<<16))
	}
	if cfg.KeepRegistered == 0 {
		cfg.KeepRegistered = 2
	}
	if cfg.Streams == 0 {
		cfg.Streams = 2
	}
	if cfg.Window == 0 {
		cfg.Window = max(32, 4*cfg.Slots)
	}
	switch cfg.AfterCopy {
	case "":
		cfg.AfterCopy = Preemptible
	case Preemptible, Evict, Keep:
	default:
		return nil, fmt.Errorf("gpu staging ring: after-copy policy %q: want preemptible, evict or keep", cfg.AfterCopy)
	}
	if cfg.KeepRegistered < 0 || cfg.Streams < 1 || cfg.DeviceBytes < 0 || cfg.Window < 1 {
		return nil, fmt.Errorf("gpu staging ring: KeepRegistered %d, Streams %d, DeviceBytes %d, Window %d: out of range", cfg.KeepRegistered, cfg.Streams, cfg.DeviceBytes, cfg.Window)
	}
	if cfg.DeviceBytes == 0 {
		cfg.DeviceBytes = int64(cfg.Slots) * slot
		if mi, err := cfg.Device.MemInfo(); err == nil && mi.Free/2 < cfg.DeviceBytes {
			cfg.DeviceBytes = max(slot, mi.Free/2/slot*slot)
		}
	}
	q, err := NewQuota(cfg.DeviceBytes)
	if err != nil {
		return nil, err
	}
	if cfg.DeviceBytes < slot {
		return nil, fmt.Errorf("gpu staging ring: device memory quota %d is smaller than one batch (%d bytes)", cfg.DeviceBytes, slot)
	}
	policy := map[AfterCopy]uma.Policy{Preemptible: uma.PolicyMarkPreemptible, Evict: uma.PolicyEvictCPU, Keep: uma.PolicyKeep}[cfg.AfterCopy]
	a, err := cfg.UMA.NewArena(cfg.Name, int64(cfg.Slots)*slot, uma.ArenaOptions{ChunkSize: slot, Policy: policy, PreemptWithoutSource: true})
	if err != nil {
		return nil, fmt.Errorf("gpu staging ring: %w", err)
	}
	r := &Ring{cfg: cfg, slot: slot, arena: a, quota: q}
	for i := range cfg.Slots {
		s := &slotState{i: i, off: int64(i) * slot}
		r.slots = append(r.slots, s)
	}
	// The coldest slots at the bottom of the stack: slot 0 is used first.
	for i := len(r.slots) - 1; i >= 0; i-- {
		r.coldFree = append(r.coldFree, r.slots[i])
	}
	r.stats.Slots = cfg.Slots
	for range cfg.Streams {
		s, err := cfg.Device.NewStream()
		if err != nil {
			_ = r.closeDevice()
			_ = a.Close()
			return nil, fmt.Errorf("gpu staging ring: %w", err)
		}
		r.streams = append(r.streams, s)
	}
	return r, nil
}

// SlotBytes is the size of one slot (the largest batch, page-rounded).
func (r *Ring) SlotBytes() int64 { return r.slot }

// Slots is the number of slots.
func (r *Ring) Slots() int { return len(r.slots) }

// Device is the ring's device.
func (r *Ring) Device() gpu.Device { return r.cfg.Device }

// Quota is the device memory quota.
func (r *Ring) Quota() *Quota { return r.quota }

// Arena is the ring's UMA arena.
func (r *Ring) Arena() *uma.Arena { return r.arena }

// Stats returns what the ring did so far.
func (r *Ring) Stats() RingStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.InUse = r.inUse
	s.DeviceBuffers = r.nbufs
	for _, x := range r.slots {
		if x.reg != nil {
			s.Registered++
		}
	}
	return s
}

func (r *Ring) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// Err is the first failure of work done when a slot came back (unregistering,
// marking); Acquire returns it too, so a graph stops on it.
func (r *Ring) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Acquire takes a free slot, waiting while every slot holds a batch, until
// ctx ends. A registered slot is taken first; otherwise a slot is
// registered now (with UMA, then the device): once per slot, not per batch,
// while the ring streams.
func (r *Ring) Acquire(ctx context.Context) (*Slot, error) {
	r.mu.Lock()
	var s *slotState
	for {
		switch {
		case r.closed:
			r.mu.Unlock()
			return nil, fmt.Errorf("gpu staging ring %q: %w", r.cfg.Name, gpu.ErrClosed)
		case r.err != nil:
			err := r.err
			r.mu.Unlock()
			return nil, err
		case len(r.regFree) > 0:
			s = r.regFree[len(r.regFree)-1]
			r.regFree = r.regFree[:len(r.regFree)-1]
		case len(r.coldFree) > 0:
			s = r.coldFree[len(r.coldFree)-1]
			r.coldFree = r.coldFree[:len(r.coldFree)-1]
		}
		if s != nil {
			break
		}
		if r.wake == nil {
			r.wake = make(chan struct{})
		}
		w := r.wake
		r.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return nil, fmt.Errorf("gpu staging ring %q: waiting for a free slot (all %d hold batches): %w", r.cfg.Name, len(r.slots), ctx.Err())
		}
		r.mu.Lock()
	}
	r.inUse++
	if len(r.window) < r.cfg.Window {
		r.window = append(r.window, r.inUse)
	} else {
		r.window[r.wpos] = r.inUse
		r.wpos = (r.wpos + 1) % len(r.window)
	}
	r.mu.Unlock()
	if err := r.prepare(ctx, s); err != nil {
		r.putBack(s)
		return nil, err
	}
	return &Slot{r: r, s: s}, nil
}

// prepare registers s if it is not: with UMA (overwrite: the batch replaces
// whatever the slot held, so a slot the kernel took is not restored), then
// with the device. The registration keeps UMA from preempting the slot.
func (r *Ring) prepare(ctx context.Context, s *slotState) error {
	if s.reg == nil {
		reg, err := r.arena.Register(ctx, s.off, r.slot, true)
		if err != nil {
			return fmt.Errorf("gpu staging ring %q: slot %d: %w", r.cfg.Name, s.i, err)
		}
		if err := r.cfg.Device.Register(reg.Bytes()); err != nil {
			reg.Release()
			return fmt.Errorf("gpu staging ring %q: slot %d: %w", r.cfg.Name, s.i, err)
		}
		s.reg = reg
		r.mu.Lock()
		r.nreg++
		r.stats.Registrations++
		r.mu.Unlock()
	}
	return nil
}

// putBack returns a slot that never held a batch.
func (r *Ring) putBack(s *slotState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inUse--
	if s.reg != nil {
		r.regFree = append(r.regFree, s)
	} else {
		r.coldFree = append(r.coldFree, s)
	}
	r.wakeLocked()
}

func (r *Ring) wakeLocked() {
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

func (r *Ring) finish(s *Slot, copied bool) error {
	s.finished.Store(true)
	if s.tx != nil {
		s.tx.Done(copied)
	}
	if s.ev != nil {
		r.putEvent(s.ev)
	}
	st := s.s
	r.mu.Lock()
	keep := r.cfg.AfterCopy == Keep || r.nreg <= max(r.cfg.KeepRegistered, r.peakLocked())
	if keep {
		r.inUse--
		r.regFree = append(r.regFree, st)
		r.stats.Kept++
		r.wakeLocked()
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	err := r.release(st)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inUse--
	if st.reg != nil { // could not unregister: keep it registered and usable
		r.regFree = append(r.regFree, st)
	} else {
		r.coldFree = append(r.coldFree, st)
	}
	r.wakeLocked()
	return err
}

// peakLocked is the most slots in use at once over the recent acquisitions.
func (r *Ring) peakLocked() int {
	p := 0
	for _, n := range r.window {
		p = max(p, n)
	}
	return p
}

// release unregisters st (device first, then the ledger) and gives its pages
// back per AfterCopy.
func (r *Ring) release(st *slotState) error {
	if err := r.cfg.Device.Unregister(st.reg.Bytes()); err != nil {
		return fmt.Errorf("gpu staging ring %q: slot %d: %w", r.cfg.Name, st.i, err)
	}
	st.reg.Release()
	st.reg = nil
	r.mu.Lock()
	r.nreg--
	r.stats.Unregistrations++
	r.mu.Unlock()
	if r.cfg.AfterCopy == Evict {
		n, err := r.arena.EvictRange(st.off, r.slot)
		if err != nil {
			return fmt.Errorf("gpu staging ring %q: evict slot %d: %w", r.cfg.Name, st.i, err)
		}
		if n > 0 {
			r.mu.Lock()
			r.stats.Evicted++
			r.mu.Unlock()
		}
		return nil
	}
	res, err := r.arena.MarkRangePreemptible(context.Background(), st.off, r.slot)
	if err != nil {
		return fmt.Errorf("gpu staging ring %q: mark slot %d preemptible: %w", r.cfg.Name, st.i, err)
	}
	r.mu.Lock()
	r.stats.Marked += int64(res.Marked)
	r.stats.Evicted += int64(res.Evicted)
	r.mu.Unlock()
	return nil
}

// Shed gives the pages of the ring's idle slots back at once: the slots that
// AfterCopy made PREEMPTIBLE (unregistered once their copy completed) are
// dropped with MADV_DONTNEED and become EVICTED, so the cgroup's usage falls
// now rather than when reclaim gets to them; the next batch staged in such a
// slot overwrites it, as after reclaim. Registered slots, slots holding a
// batch and slots never used are left alone. It returns the bytes given back:
// a memory runtime runs it as a shed action at Critical.
func (r *Ring) Shed() (int64, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return 0, nil
	}
	n, err := r.arena.EvictPreemptible()
	if errors.Is(err, uma.ErrClosed) {
		return n, nil // closed meanwhile: its pages are gone
	}
	if err != nil {
		return n, fmt.Errorf("gpu staging ring %q: shed: %w", r.cfg.Name, err)
	}
	return n, nil
}

// Close unregisters every slot, frees the device buffers, closes the streams
// and events and unmaps the arena. Every slot and device buffer must have
// come back (the graph that used the ring has ended).
func (r *Ring) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	if r.inUse > 0 || len(r.bufs) != r.nbufs {
		n, b := r.inUse, r.nbufs-len(r.bufs)
		r.mu.Unlock()
		return fmt.Errorf("gpu staging ring %q: close with %d slots and %d device buffers still holding batches", r.cfg.Name, n, b)
	}
	r.closed = true
	r.wakeLocked()
	bg := r.err
	r.mu.Unlock()
	var errs []error
	for _, s := range r.slots {
		if s.reg != nil {
			if err := r.cfg.Device.Unregister(s.reg.Bytes()); err != nil {
				errs = append(errs, err)
			}
			s.reg.Release()
			s.reg = nil
		}
	}
	r.mu.Lock()
	errs = append(errs, r.closeDevice())
	r.mu.Unlock()
	errs = append(errs, r.arena.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gpu staging ring %q: close: %w", r.cfg.Name, err)
	}
	return bg
}

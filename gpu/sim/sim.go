package sim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/gpu/internal/hostmem"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/zeebo/xxh3"
)

// Config describes the simulated device.
type Config struct {
	// Capacity is the device memory in bytes (default 1 GiB).
	Capacity int64
	// Bandwidth is the host-to-device copy rate in bytes per second (default
	// 25e9, what a PCIe 4.0 x16 link moves in practice).
	Bandwidth float64
	// Latency is the fixed cost of each copy (default 10 µs).
	Latency time.Duration
	// Discard keeps no device bytes: copies are paced and checked but not
	// stored, so the simulation adds no host memory of its own (a real
	// device's memory is not the host's). CopyToHost is then refused.
	Discard bool
}

func (c *Config) defaults() error {
	if c.Capacity == 0 {
		c.Capacity = 1 << 30
	}
	if c.Bandwidth == 0 {
		c.Bandwidth = 25e9
	}
	if c.Latency == 0 {
		c.Latency = 10 * time.Microsecond
	}
	switch {
	case c.Capacity < 0:
		return fmt.Errorf("simulated device: capacity %d must be positive", c.Capacity)
	case !(c.Bandwidth > 0) || c.Bandwidth > 1e15:
		return fmt.Errorf("simulated device: bandwidth %v bytes/s must be positive and finite", c.Bandwidth)
	case c.Latency < 0:
		return fmt.Errorf("simulated device: latency %v must not be negative", c.Latency)
	}
	return nil
}

// Stats is what the simulated device did.
type Stats struct {
	// Copies and Bytes count completed host-to-device copies.
	Copies, Bytes int64
	// Busy is the modelled time the copy engine spent copying.
	Busy time.Duration
	// Registers and Unregisters count host registrations.
	Registers, Unregisters int64
	// ChangedInFlight counts copies whose host bytes changed between the
	// enqueue and the copy: a buffer reused before its copy completed.
	ChangedInFlight int64
	// Allocated is the device memory allocated now; Peak the most at once.
	Allocated, Peak int64
}

// Device is a simulated gpu.Device: device memory from host memory up to a
// capacity, and one copy engine that moves the bytes of each copy at the
// configured bandwidth, in enqueue order, after a fixed latency. Streams,
// events and registration follow the same rules as the CUDA device (only
// memory inside a live uma.Registration is registered and copied
// asynchronously). Its name, errors and stats say "simulated".
type Device struct {
	cfg  Config
	name string

	mu      sync.Mutex
	closed  bool
	host    hostmem.Table
	allocs  map[gpu.Ptr]*alloc
	next    gpu.Ptr
	used    int64
	stats   Stats
	streams map[*Stream]struct{}
	events  map[*Event]struct{}

	queue   chan *op       // the copy engine's work, in enqueue order
	sending sync.WaitGroup // enqueues in progress (Close waits for them before closing queue)
	engine  sync.WaitGroup
	pending map[*op]struct{}
	// hold is taken by the engine before each operation: a test that holds it
	// stops the engine (tests only).
	hold sync.Mutex
}

type alloc struct {
	base gpu.Ptr
	n    int64
	mem  []byte // nil with Discard
}

type op struct {
	dst   *alloc
	off   int64
	src   []byte
	sum   uint64
	mark  *mark // a record or synchronize point instead of a copy
	queue *Stream
}

// mark is a point in a stream: done closes when the work before it has completed.
type mark struct{ done chan struct{} }

var _ gpu.Device = (*Device)(nil)

// Open starts a simulated device.
func Open(cfg Config) (*Device, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	d := &Device{cfg: cfg, allocs: map[gpu.Ptr]*alloc{}, next: 1 << 40,
		streams: map[*Stream]struct{}{}, events: map[*Event]struct{}{},
		queue: make(chan *op, 1024), pending: map[*op]struct{}{}}
	d.name = fmt.Sprintf("simulated device (%s, %.1f GB/s host-to-device, %v per copy)", bytesize.Human(cfg.Capacity), cfg.Bandwidth/1e9, cfg.Latency)
	if cfg.Discard {
		d.name += ", bytes discarded"
	}
	d.engine.Add(1)
	go d.run()
	return d, nil
}

// run is the copy engine: one copy at a time, each taking latency +
// bytes/bandwidth of wall-clock time (the memcpy included).
func (d *Device) run() {
	defer d.engine.Done()
	for o := range d.queue {
		d.hold.Lock()
		//lint:ignore SA2001 an empty critical section on purpose: wait while a test holds the engine
		d.hold.Unlock()
		if o.mark != nil {
			close(o.mark.done)
			d.finish(o)
			continue
		}
		start := time.Now()
		dur := d.cfg.Latency + time.Duration(float64(len(o.src))/d.cfg.Bandwidth*float64(time.Second))
		changed := xxh3.Hash(o.src) != o.sum
		if o.dst.mem != nil {
			copy(o.dst.mem[o.off:], o.src)
		}
		if left := dur - time.Since(start); left > 0 {
			time.Sleep(left)
		}
		d.mu.Lock()
		d.stats.Copies++
		d.stats.Bytes += int64(len(o.src))
		d.stats.Busy += dur
		if changed {
			d.stats.ChangedInFlight++
		}
		d.mu.Unlock()
		d.finish(o)
	}
}

func (d *Device) finish(o *op) {
	d.mu.Lock()
	delete(d.pending, o)
	d.mu.Unlock()
}

// Kind is gpu.Sim.
func (d *Device) Kind() gpu.Kind { return gpu.Sim }

// Name starts with "simulated" and gives the model.
func (d *Device) Name() string { return d.name }

// Stats returns what the device did so far.
func (d *Device) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Allocated = d.used
	return s
}

func (d *Device) errClosed(op string) error {
	return fmt.Errorf("simulated device: %s: %w", op, gpu.ErrClosed)
}

// Alloc takes n bytes of the device's capacity.
func (d *Device) Alloc(ctx context.Context, n int64) (gpu.Ptr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("simulated device: alloc of %d bytes: the size must be positive", n)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, d.errClosed("alloc")
	}
	if d.used+n > d.cfg.Capacity {
		return 0, fmt.Errorf("simulated device: alloc of %d bytes with %d of %d in use: %w", n, d.used, d.cfg.Capacity, gpu.ErrOutOfMemory)
	}
	a := &alloc{base: d.next, n: n}
	if !d.cfg.Discard {
		a.mem = make([]byte, n)
	}
	d.allocs[a.base] = a
	d.next += gpu.Ptr((n+255)/256*256 + 4096)
	d.used += n
	d.stats.Peak = max(d.stats.Peak, d.used)
	return a.base, nil
}

// find returns the allocation holding [p, p+n). Called with d.mu held.
func (d *Device) find(p gpu.Ptr, n int) (*alloc, error) {
	if n <= 0 {
		return nil, errors.New("empty copy")
	}
	for base, a := range d.allocs {
		if p >= base && uint64(p)+uint64(n) <= uint64(base)+uint64(a.n) {
			return a, nil
		}
	}
	return nil, fmt.Errorf("device range %#x (+%d) is not inside one allocation", uint64(p), n)
}

func (d *Device) pendingLocked(test func(o *op) bool) bool {
	for o := range d.pending {
		if o.mark == nil && test(o) {
			return true
		}
	}
	return false
}

// Free returns memory from Alloc; no copy into it may be pending.
func (d *Device) Free(p gpu.Ptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.errClosed("free")
	}
	a, ok := d.allocs[p]
	if !ok {
		return fmt.Errorf("simulated device: free of %#x: not an allocation", uint64(p))
	}
	if d.pendingLocked(func(o *op) bool { return o.dst == a }) {
		return fmt.Errorf("simulated device: free of %#x: a pending copy still writes it (wait for its event first)", uint64(p))
	}
	delete(d.allocs, p)
	d.used -= a.n
	return nil
}

// Register records host as registered; it must lie inside a live
// uma.Registration and overlap no other registration.
func (d *Device) Register(host []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.errClosed("register")
	}
	if err := d.host.Add(host); err != nil {
		return &gpu.MemoryError{Op: "register", Device: d.name, Err: err}
	}
	d.stats.Registers++
	return nil
}

// Unregister undoes Register; no copy from host may be pending.
func (d *Device) Unregister(host []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.errClosed("unregister")
	}
	lo, hi := hostmem.Addr(host), hostmem.Addr(host)+uintptr(len(host))
	if d.pendingLocked(func(o *op) bool {
		a := hostmem.Addr(o.src)
		return a < hi && lo < a+uintptr(len(o.src))
	}) {
		return &gpu.MemoryError{Op: "unregister", Device: d.name, Err: errors.New("a pending copy still reads it (wait for its event first)")}
	}
	if err := d.host.Remove(host); err != nil {
		return &gpu.MemoryError{Op: "unregister", Device: d.name, Err: err}
	}
	d.stats.Unregisters++
	return nil
}

// CopyToHost copies device bytes back (refused with Config.Discard, and while
// a pending copy still writes them).
func (d *Device) CopyToHost(ctx context.Context, dst []byte, src gpu.Ptr) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.errClosed("copy to host")
	}
	a, err := d.find(src, len(dst))
	if err != nil {
		return fmt.Errorf("simulated device: copy to host: %w", err)
	}
	if a.mem == nil {
		return errors.New("simulated device: copy to host: the device was opened with Discard and keeps no bytes")
	}
	off := int64(src - a.base)
	if d.pendingLocked(func(o *op) bool { return o.dst == a && o.off < off+int64(len(dst)) && off < o.off+int64(len(o.src)) }) {
		return errors.New("simulated device: copy to host: a pending copy still writes these bytes (synchronize its stream first)")
	}
	copy(dst, a.mem[off:off+int64(len(dst))])
	return nil
}

// MemInfo reports the capacity and what is free of it.
func (d *Device) MemInfo() (gpu.MemInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return gpu.MemInfo{}, d.errClosed("memory info")
	}
	return gpu.MemInfo{Free: d.cfg.Capacity - d.used, Total: d.cfg.Capacity}, nil
}

// Close waits for the copy engine, ends it and says what was left open.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	var left []string
	for _, c := range []struct {
		n    int
		what string
	}{{len(d.streams), "streams"}, {len(d.events), "events"}, {len(d.allocs), "allocations"}, {d.host.Len(), "host registrations"}} {
		if c.n > 0 {
			left = append(left, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	sort.Strings(left)
	d.mu.Unlock()
	d.sending.Wait() // closed is set: no enqueue starts any more
	close(d.queue)
	d.engine.Wait()
	if len(left) > 0 {
		return fmt.Errorf("simulated device: close: %v were still open", left)
	}
	return nil
}

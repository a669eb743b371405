//go:build linux

package cuda

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/gpu/internal/hostmem"
)

// Driver constants psiflow passes.
const (
	streamNonBlocking  = 1 // CU_STREAM_NON_BLOCKING: no implicit sync with the legacy default stream
	eventDisableTiming = 2 // CU_EVENT_DISABLE_TIMING: the cheapest event to record and wait for
)

// Device is one CUDA device through the driver API, with its primary context.
// It implements [gpu.Device]. Calls that need the context run on goroutines
// locked to their OS threads: one for control (allocation, registration,
// events, synchronous copies), one per stream, and one that waits for events.
type Device struct {
	l       *lib
	ordinal int
	dev     int32
	ctx     uintptr // CUcontext
	name    string
	driver  int

	ctl    *thread
	waiter *thread

	mu     sync.RWMutex // read: an operation in progress; write: Close
	closed bool

	host    hostmem.Table
	omu     sync.Mutex
	allocs  map[gpu.Ptr]int64
	streams map[*Stream]struct{}
	events  map[*Event]struct{}
}

var _ gpu.Device = (*Device)(nil)

// Open loads the driver library (cfg.Library, else [DefaultLibrary]),
// initialises it and retains the primary context of device cfg.Ordinal. No
// library is gpu.ErrNoDriver; no such device is gpu.ErrNoDevice.
func Open(cfg Config) (*Device, error) {
	path := cfg.Library
	if path == "" {
		path = DefaultLibrary
	}
	l, err := load(path)
	if err != nil {
		return nil, err
	}
	if err := l.check("cuInit", call(l.init, 0)); err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", path, err)
	}
	var ver, n int32
	if err := l.check("cuDriverGetVersion", call(l.driverGetVersion, uintptr(unsafe.Pointer(&ver)))); err != nil {
		return nil, err
	}
	if err := l.check("cuDeviceGetCount", call(l.deviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	if cfg.Ordinal < 0 || cfg.Ordinal >= int(n) {
		return nil, fmt.Errorf("%w: cuda: device %d asked for, the driver (%s) reports %d", gpu.ErrNoDevice, cfg.Ordinal, path, n)
	}
	d := &Device{l: l, ordinal: cfg.Ordinal, driver: int(ver),
		allocs: map[gpu.Ptr]int64{}, streams: map[*Stream]struct{}{}, events: map[*Event]struct{}{}}
	if err := l.check("cuDeviceGet", call(l.deviceGet, uintptr(unsafe.Pointer(&d.dev)), uintptr(cfg.Ordinal))); err != nil {
		return nil, err
	}
	var name [256]byte
	if err := l.check("cuDeviceGetName", call(l.deviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(d.dev))); err != nil {
		return nil, err
	}
	model := string(name[:max(0, strings.IndexByte(string(name[:]), 0))])
	d.name = fmt.Sprintf("cuda:%d %s (driver %d.%d)", cfg.Ordinal, model, ver/1000, ver%1000/10)
	if err := l.check("cuDevicePrimaryCtxRetain", call(l.primaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev))); err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", d.name, err)
	}
	if d.ctl, err = startThread(l, d.ctx); err == nil {
		if d.waiter, err = startThread(l, d.ctx); err != nil {
			d.ctl.stop()
		}
	}
	if err != nil {
		_ = l.check("cuDevicePrimaryCtxRelease_v2", call(l.primaryCtxRelease, uintptr(d.dev)))
		return nil, fmt.Errorf("cuda: %s: %w", d.name, err)
	}
	return d, nil
}

// Kind is gpu.CUDA.
func (d *Device) Kind() gpu.Kind { return gpu.CUDA }

// Name is "cuda:N <model> (driver X.Y)".
func (d *Device) Name() string { return d.name }

// Library is the driver library that was loaded.
func (d *Device) Library() string { return d.l.path }

// enter starts an operation: it fails once the device is closed. Every
// successful enter is paired with d.mu.RUnlock.
func (d *Device) enter(op string) error {
	d.mu.RLock()
	if d.closed {
		d.mu.RUnlock()
		return fmt.Errorf("cuda: %s on %s: %w", op, d.name, gpu.ErrClosed)
	}
	return nil
}

// Alloc allocates n bytes of device memory (cuMemAlloc_v2).
func (d *Device) Alloc(ctx context.Context, n int64) (gpu.Ptr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("cuda: alloc of %d bytes on %s: the size must be positive", n, d.name)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := d.enter("alloc"); err != nil {
		return 0, err
	}
	defer d.mu.RUnlock()
	var p uint64
	var r int32
	d.ctl.do(func() { r = call(d.l.memAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n)) })
	if err := d.l.check("cuMemAlloc_v2", r); err != nil {
		return 0, fmt.Errorf("cuda: alloc of %d bytes on %s: %w", n, d.name, err)
	}
	d.omu.Lock()
	d.allocs[gpu.Ptr(p)] = n
	d.omu.Unlock()
	return gpu.Ptr(p), nil
}

// Free frees memory from Alloc (cuMemFree_v2).
func (d *Device) Free(p gpu.Ptr) error {
	if err := d.enter("free"); err != nil {
		return err
	}
	defer d.mu.RUnlock()
	d.omu.Lock()
	_, ok := d.allocs[p]
	delete(d.allocs, p)
	d.omu.Unlock()
	if !ok {
		return fmt.Errorf("cuda: free of %#x on %s: not an allocation of this device", uint64(p), d.name)
	}
	return d.free(p)
}

func (d *Device) free(p gpu.Ptr) error {
	var r int32
	d.ctl.do(func() { r = call(d.l.memFree, uintptr(p)) })
	if err := d.l.check("cuMemFree_v2", r); err != nil {
		return fmt.Errorf("cuda: free of %#x on %s: %w", uint64(p), d.name, err)
	}
	return nil
}

// checkDev checks that [p, p+n) lies inside one allocation.
func (d *Device) checkDev(p gpu.Ptr, n int) error {
	if n <= 0 {
		return fmt.Errorf("empty copy")
	}
	d.omu.Lock()
	defer d.omu.Unlock()
	for base, size := range d.allocs {
		if p >= base && uint64(p)+uint64(n) <= uint64(base)+uint64(size) {
			return nil
		}
	}
	return fmt.Errorf("device range %#x (+%d) is not inside one allocation of %s", uint64(p), n, d.name)
}

// Register page-locks host for DMA (cuMemHostRegister_v2). host must lie
// inside a live uma.Registration.
func (d *Device) Register(host []byte) error {
	if err := d.enter("register"); err != nil {
		return err
	}
	defer d.mu.RUnlock()
	if err := d.host.Add(host); err != nil {
		return &gpu.MemoryError{Op: "register", Device: d.name, Err: err}
	}
	var r int32
	d.ctl.do(func() {
		r = call(d.l.memHostRegister, uintptr(unsafe.Pointer(unsafe.SliceData(host))), uintptr(len(host)), 0)
	})
	if err := d.l.check("cuMemHostRegister_v2", r); err != nil {
		_ = d.host.Remove(host)
		return fmt.Errorf("cuda: register %d bytes on %s: %w", len(host), d.name, err)
	}
	return nil
}

// Unregister undoes Register (cuMemHostUnregister).
func (d *Device) Unregister(host []byte) error {
	if err := d.enter("unregister"); err != nil {
		return err
	}
	defer d.mu.RUnlock()
	if err := d.host.Remove(host); err != nil {
		return &gpu.MemoryError{Op: "unregister", Device: d.name, Err: err}
	}
	return d.unregister(host)
}

func (d *Device) unregister(host []byte) error {
	var r int32
	d.ctl.do(func() { r = call(d.l.memHostUnregister, uintptr(unsafe.Pointer(unsafe.SliceData(host)))) })
	if err := d.l.check("cuMemHostUnregister", r); err != nil {
		return fmt.Errorf("cuda: unregister %d bytes on %s: %w", len(host), d.name, err)
	}
	return nil
}

// CopyToHost copies len(dst) bytes from src to dst (cuMemcpyDtoH_v2,
// synchronous). Synchronize the streams that write src first.
func (d *Device) CopyToHost(ctx context.Context, dst []byte, src gpu.Ptr) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.enter("copy to host"); err != nil {
		return err
	}
	defer d.mu.RUnlock()
	if err := d.checkDev(src, len(dst)); err != nil {
		return fmt.Errorf("cuda: copy to host: %w", err)
	}
	var r int32
	d.ctl.do(func() {
		r = call(d.l.memcpyDtoH, uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(src), uintptr(len(dst)))
	})
	if err := d.l.check("cuMemcpyDtoH_v2", r); err != nil {
		return fmt.Errorf("cuda: copy of %d bytes to host on %s: %w", len(dst), d.name, err)
	}
	return nil
}

// MemInfo reports free and total device memory (cuMemGetInfo_v2).
func (d *Device) MemInfo() (gpu.MemInfo, error) {
	if err := d.enter("memory info"); err != nil {
		return gpu.MemInfo{}, err
	}
	defer d.mu.RUnlock()
	var free, total uintptr
	var r int32
	d.ctl.do(func() { r = call(d.l.memGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))) })
	if err := d.l.check("cuMemGetInfo_v2", r); err != nil {
		return gpu.MemInfo{}, fmt.Errorf("cuda: memory info of %s: %w", d.name, err)
	}
	return gpu.MemInfo{Free: int64(free), Total: int64(total)}, nil
}

// Close closes what is left open (and says what that was), releases the
// primary context and ends the device's threads.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.omu.Lock()
	streams := make([]*Stream, 0, len(d.streams))
	for s := range d.streams {
		streams = append(streams, s)
	}
	events := make([]*Event, 0, len(d.events))
	for e := range d.events {
		events = append(events, e)
	}
	allocs := make([]gpu.Ptr, 0, len(d.allocs))
	for p := range d.allocs {
		allocs = append(allocs, p)
	}
	d.allocs = map[gpu.Ptr]int64{}
	d.omu.Unlock()
	sort.Slice(allocs, func(i, j int) bool { return allocs[i] < allocs[j] })

	var errs []error
	for _, s := range streams {
		errs = append(errs, s.close())
	}
	for _, e := range events {
		errs = append(errs, e.close())
	}
	for _, p := range allocs {
		errs = append(errs, d.free(p))
	}
	regs := d.host.Ranges()
	for _, b := range regs {
		_ = d.host.Remove(b)
		errs = append(errs, d.unregister(b))
	}
	var left []string
	for _, c := range []struct {
		n    int
		what string
	}{{len(streams), "streams"}, {len(events), "events"}, {len(allocs), "allocations"}, {len(regs), "host registrations"}} {
		if c.n > 0 {
			left = append(left, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(left) > 0 {
		errs = append(errs, fmt.Errorf("cuda: close %s: %s were still open (closed now)", d.name, strings.Join(left, ", ")))
	}
	errs = append(errs, d.l.check("cuDevicePrimaryCtxRelease_v2", call(d.l.primaryCtxRelease, uintptr(d.dev))))
	d.ctl.stop()
	d.waiter.stop()
	return errors.Join(errs...)
}

// Stream is a CUDA stream (non-blocking) with its own locked thread. It
// implements [gpu.Stream].
type Stream struct {
	d      *Device
	h      uintptr // CUstream
	th     *thread
	mu     sync.RWMutex
	closed bool
}

// NewStream starts a thread, makes the context current on it and creates a
// non-blocking stream there (cuStreamCreate).
func (d *Device) NewStream() (gpu.Stream, error) {
	if err := d.enter("new stream"); err != nil {
		return nil, err
	}
	defer d.mu.RUnlock()
	th, err := startThread(d.l, d.ctx)
	if err != nil {
		return nil, fmt.Errorf("cuda: new stream on %s: %w", d.name, err)
	}
	s := &Stream{d: d, th: th}
	var r int32
	th.do(func() { r = call(d.l.streamCreate, uintptr(unsafe.Pointer(&s.h)), streamNonBlocking) })
	if err := d.l.check("cuStreamCreate", r); err != nil {
		th.stop()
		return nil, fmt.Errorf("cuda: new stream on %s: %w", d.name, err)
	}
	d.omu.Lock()
	d.streams[s] = struct{}{}
	d.omu.Unlock()
	return s, nil
}

// enter starts a stream operation (device lock first, then the stream's).
func (s *Stream) enter(op string) error {
	if err := s.d.enter(op); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		s.d.mu.RUnlock()
		return fmt.Errorf("cuda: %s on a stream of %s: %w", op, s.d.name, gpu.ErrClosed)
	}
	return nil
}

func (s *Stream) leave() {
	s.mu.RUnlock()
	s.d.mu.RUnlock()
}

// CopyToDevice enqueues cuMemcpyHtoDAsync_v2 of src to dst. src must lie in
// memory registered with this device (and in a live uma.Registration); dst
// inside one allocation.
func (s *Stream) CopyToDevice(dst gpu.Ptr, src []byte) error {
	if err := s.enter("copy to device"); err != nil {
		return err
	}
	defer s.leave()
	d := s.d
	if err := d.host.Contains(src); err != nil {
		return &gpu.MemoryError{Op: "copy to device", Device: d.name, Err: err}
	}
	if err := d.checkDev(dst, len(src)); err != nil {
		return fmt.Errorf("cuda: copy to device: %w", err)
	}
	var r int32
	s.th.do(func() {
		r = call(d.l.memcpyHtoDAsync, uintptr(dst), uintptr(unsafe.Pointer(unsafe.SliceData(src))), uintptr(len(src)), s.h)
	})
	if err := d.l.check("cuMemcpyHtoDAsync_v2", r); err != nil {
		return fmt.Errorf("cuda: copy of %d bytes to device on %s: %w", len(src), d.name, err)
	}
	return nil
}

// Record enqueues cuEventRecord of e, an event of the same device.
func (s *Stream) Record(e gpu.Event) error {
	ev, ok := e.(*Event)
	if !ok || ev.d != s.d {
		return fmt.Errorf("cuda: record on a stream of %s: the event is not one of its events (%T)", s.d.name, e)
	}
	if err := s.enter("record"); err != nil {
		return err
	}
	defer s.leave()
	ev.mu.RLock()
	defer ev.mu.RUnlock()
	if ev.closed {
		return fmt.Errorf("cuda: record on %s: event %w", s.d.name, gpu.ErrClosed)
	}
	var r int32
	s.th.do(func() { r = call(s.d.l.eventRecord, ev.h, s.h) })
	if err := s.d.l.check("cuEventRecord", r); err != nil {
		return fmt.Errorf("cuda: record on %s: %w", s.d.name, err)
	}
	return nil
}

// Synchronize waits for the stream's work (cuStreamSynchronize on its thread).
// If ctx ends first it returns ctx's error; the wait itself completes later.
func (s *Stream) Synchronize(ctx context.Context) error {
	if err := s.enter("synchronize"); err != nil {
		return err
	}
	defer s.leave()
	done := make(chan int32, 1)
	select {
	case s.th.work <- func() { done <- call(s.d.l.streamSynchronize, s.h) }:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case r := <-done:
		if err := s.d.l.check("cuStreamSynchronize", r); err != nil {
			return fmt.Errorf("cuda: synchronize a stream of %s: %w", s.d.name, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close waits for the stream's work, destroys it and ends its thread.
func (s *Stream) Close() error {
	if err := s.d.enter("close stream"); err != nil {
		return err
	}
	defer s.d.mu.RUnlock()
	s.d.omu.Lock()
	delete(s.d.streams, s)
	s.d.omu.Unlock()
	return s.close()
}

func (s *Stream) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var rs, rd int32
	s.th.do(func() {
		rs = call(s.d.l.streamSynchronize, s.h)
		rd = call(s.d.l.streamDestroy, s.h)
	})
	s.th.stop()
	return errors.Join(s.d.l.check("cuStreamSynchronize", rs), s.d.l.check("cuStreamDestroy_v2", rd))
}

// Event is a CUDA event. It implements [gpu.Event].
type Event struct {
	d      *Device
	h      uintptr // CUevent
	timing bool
	mu     sync.RWMutex
	closed bool
	waits  sync.WaitGroup // waits still running on the waiter thread
}

// NewEvent creates an event without timing (cuEventCreate with
// CU_EVENT_DISABLE_TIMING), the cheapest to record and wait for.
func (d *Device) NewEvent() (gpu.Event, error) { return d.newEvent(false) }

// NewTimingEvent creates an event that [Event.Elapsed] can time.
func (d *Device) NewTimingEvent() (*Event, error) { return d.newEvent(true) }

func (d *Device) newEvent(timing bool) (*Event, error) {
	if err := d.enter("new event"); err != nil {
		return nil, err
	}
	defer d.mu.RUnlock()
	e := &Event{d: d, timing: timing}
	flags := uintptr(eventDisableTiming)
	if timing {
		flags = 0
	}
	var r int32
	d.ctl.do(func() { r = call(d.l.eventCreate, uintptr(unsafe.Pointer(&e.h)), flags) })
	if err := d.l.check("cuEventCreate", r); err != nil {
		return nil, fmt.Errorf("cuda: new event on %s: %w", d.name, err)
	}
	d.omu.Lock()
	d.events[e] = struct{}{}
	d.omu.Unlock()
	return e, nil
}

func (e *Event) enter(op string) error {
	if err := e.d.enter(op); err != nil {
		return err
	}
	e.mu.RLock()
	if e.closed {
		e.mu.RUnlock()
		e.d.mu.RUnlock()
		return fmt.Errorf("cuda: %s on an event of %s: %w", op, e.d.name, gpu.ErrClosed)
	}
	return nil
}

func (e *Event) leave() {
	e.mu.RUnlock()
	e.d.mu.RUnlock()
}

// Wait waits for the event on the device's waiter thread
// (cuEventSynchronize). If ctx ends first it returns ctx's error; the wait
// itself completes later, and Close waits for it.
func (e *Event) Wait(ctx context.Context) error {
	if err := e.enter("wait"); err != nil {
		return err
	}
	defer e.leave()
	done := make(chan int32, 1)
	e.waits.Add(1)
	select {
	case e.d.waiter.work <- func() { defer e.waits.Done(); done <- call(e.d.l.eventSynchronize, e.h) }:
	case <-ctx.Done():
		e.waits.Done()
		return ctx.Err()
	}
	select {
	case r := <-done:
		if err := e.d.l.check("cuEventSynchronize", r); err != nil {
			return fmt.Errorf("cuda: wait for an event of %s: %w", e.d.name, err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Elapsed is the time between start's completion and e's (both timing
// events, both completed: cuEventElapsedTime).
func (e *Event) Elapsed(start *Event) (time.Duration, error) {
	if !e.timing || !start.timing {
		return 0, fmt.Errorf("cuda: elapsed time on %s: both events must come from NewTimingEvent", e.d.name)
	}
	if err := e.enter("elapsed time"); err != nil {
		return 0, err
	}
	defer e.leave()
	var ms float32
	var r int32
	e.d.ctl.do(func() { r = call(e.d.l.eventElapsedTime, uintptr(unsafe.Pointer(&ms)), start.h, e.h) })
	if err := e.d.l.check("cuEventElapsedTime", r); err != nil {
		return 0, fmt.Errorf("cuda: elapsed time on %s: %w", e.d.name, err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the event (cuEventDestroy_v2) once no wait for it runs.
func (e *Event) Close() error {
	if err := e.d.enter("close event"); err != nil {
		return err
	}
	defer e.d.mu.RUnlock()
	e.d.omu.Lock()
	delete(e.d.events, e)
	e.d.omu.Unlock()
	return e.close()
}

func (e *Event) close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	e.waits.Wait()
	var r int32
	e.d.ctl.do(func() { r = call(e.d.l.eventDestroy, e.h) })
	return e.d.l.check("cuEventDestroy_v2", r)
}

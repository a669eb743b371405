//go:build linux

package cuda

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
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

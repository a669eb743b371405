package gpu

import (
	"context"
	"errors"
	"fmt"
)

// Kind names what kind of device a [Device] is.
type Kind string

// The device kinds.
const (
	// CUDA is an NVIDIA GPU through the CUDA driver API (package gpu/cuda).
	CUDA Kind = "cuda"
	// Sim is the simulated device: host memory with a capacity and a bandwidth
	// model (package gpu/sim). Everything it reports says "simulated".
	Sim Kind = "sim"
)

// Ptr is an address in device memory (CUDA's CUdeviceptr). Zero is never a
// valid allocation.
type Ptr uint64

// MemInfo is a device's memory as the device reports it.
type MemInfo struct {
	// Free and Total are bytes.
	Free, Total int64
}

// Device is one accelerator a loader copies batches to. Every method is safe
// for concurrent use. Memory handed to Register and to asynchronous copies
// must be UMA arena memory inside a live [uma.Registration] (see
// [CheckHost]); anything else, the Go heap first of all, is refused with an
// error.
//
// [uma.Registration]: https://pkg.go.dev/github.com/psiflow/psiflow/uma#Registration
type Device interface {
	// Kind is the device's kind.
	Kind() Kind
	// Name describes the device for people: "cuda:0 NVIDIA H200 (driver
	// 13.0)", or for the simulated device a name that starts with "simulated".
	Name() string
	// Alloc allocates n bytes of device memory.
	Alloc(ctx context.Context, n int64) (Ptr, error)
	// Free frees memory from Alloc. No copy into it may be pending.
	Free(p Ptr) error
	// Register registers host memory with the device (page-locks it for
	// DMA), once, for many copies. host must lie inside a live
	// uma.Registration and overlap no other registration.
	Register(host []byte) error
	// Unregister undoes Register; host must be exactly what was registered
	// and no copy from it may be pending.
	Unregister(host []byte) error
	// NewStream makes a stream: an ordered queue of asynchronous copies.
	NewStream() (Stream, error)
	// NewEvent makes an event to record on a stream and wait for.
	NewEvent() (Event, error)
	// CopyToHost copies n = len(dst) bytes from device memory to dst and
	// returns when they are there (for verification: it is synchronous and
	// dst may be any memory). Synchronize the streams writing src first.
	CopyToHost(ctx context.Context, dst []byte, src Ptr) error
	// MemInfo reports the device's free and total memory.
	MemInfo() (MemInfo, error)
	// Close releases the device. Every allocation, registration, stream and
	// event must have been freed, unregistered or closed: Close says which
	// were not (and frees what it can).
	Close() error
}

// Stream is an ordered queue of asynchronous work on a device.
type Stream interface {
	// CopyToDevice enqueues a copy of src to dst and returns at once; the
	// copy happens later, in stream order. src must lie inside memory
	// registered with Register, and must not change until an event recorded
	// after the copy has completed.
	CopyToDevice(dst Ptr, src []byte) error
	// Record enqueues e: it completes when all the work enqueued before it has.
	Record(e Event) error
	// Synchronize waits until all the work enqueued so far has completed.
	Synchronize(ctx context.Context) error
	// Close waits for the stream's work and releases it.
	Close() error
}

// Event marks a point in a stream.
type Event interface {
	// Wait returns when the work before the event's last Record has
	// completed (at once if it was never recorded), or when ctx ends.
	Wait(ctx context.Context) error
	// Close releases the event.
	Close() error
}

// Errors that callers may test for with errors.Is.
var (
	// ErrNoDriver: the device's driver library is not on this host (no
	// libcuda.so.1), so there is no device of that kind to open.
	ErrNoDriver = errors.New("gpu: no driver")
	// ErrNoDevice: the driver is there but reports no usable device.
	ErrNoDevice = errors.New("gpu: no device")
	// ErrClosed: the device, stream or event was closed.
	ErrClosed = errors.New("gpu: closed")
	// ErrOutOfMemory: the device has not enough free memory.
	ErrOutOfMemory = errors.New("gpu: out of device memory")
)

// MemoryError is a refused host range: what was asked and why it was refused.
type MemoryError struct {
	// Op is the operation ("register", "copy to device").
	Op string
	// Device names the device.
	Device string
	// Err is the reason.
	Err error
}

// Error names the operation, the device and the reason.
func (e *MemoryError) Error() string {
	return fmt.Sprintf("gpu: %s on %s refused: %v", e.Op, e.Device, e.Err)
}

// Unwrap returns the reason.
func (e *MemoryError) Unwrap() error { return e.Err }

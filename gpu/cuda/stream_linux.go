//go:build linux

package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/psiflow/psiflow/gpu"
)

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

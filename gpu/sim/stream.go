package sim

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/gpu"
	"github.com/zeebo/xxh3"
)

// Stream is a queue on the simulated device's copy engine.
type Stream struct {
	d      *Device
	closed bool // under d.mu
}

// NewStream makes a stream.
func (d *Device) NewStream() (gpu.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, d.errClosed("new stream")
	}
	s := &Stream{d: d}
	d.streams[s] = struct{}{}
	return s, nil
}

// enqueue adds o to the engine's queue. Called with d.mu held; the queue's
// buffer bounds how far ahead of the engine a caller gets (it then waits).
func (s *Stream) enqueue(o *op) {
	o.queue = s
	s.d.pending[o] = struct{}{}
	s.d.sending.Add(1)
	s.d.mu.Unlock()
	s.d.queue <- o
	s.d.sending.Done()
	s.d.mu.Lock()
}

// CopyToDevice enqueues a copy of src (inside memory registered with this
// device) to dst (inside one allocation).
func (s *Stream) CopyToDevice(dst gpu.Ptr, src []byte) error {
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || s.closed {
		return d.errClosed("copy to device")
	}
	if err := d.host.Contains(src); err != nil {
		return &gpu.MemoryError{Op: "copy to device", Device: d.name, Err: err}
	}
	a, err := d.find(dst, len(src))
	if err != nil {
		return fmt.Errorf("simulated device: copy to device: %w", err)
	}
	s.enqueue(&op{dst: a, off: int64(dst - a.base), src: src, sum: xxh3.Hash(src)})
	return nil
}

// Record enqueues e.
func (s *Stream) Record(e gpu.Event) error {
	ev, ok := e.(*Event)
	if !ok || ev.d != s.d {
		return fmt.Errorf("simulated device: record: the event is not one of this device's (%T)", e)
	}
	d := s.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || s.closed || ev.closed {
		return d.errClosed("record")
	}
	m := &mark{done: make(chan struct{})}
	ev.last = m
	s.enqueue(&op{mark: m})
	return nil
}

// Synchronize waits until the work enqueued so far has completed.
func (s *Stream) Synchronize(ctx context.Context) error {
	d := s.d
	d.mu.Lock()
	if d.closed || s.closed {
		d.mu.Unlock()
		return d.errClosed("synchronize")
	}
	m := &mark{done: make(chan struct{})}
	s.enqueue(&op{mark: m})
	d.mu.Unlock()
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close waits for the stream's work and releases it.
func (s *Stream) Close() error {
	if err := s.Synchronize(context.Background()); err != nil {
		return err
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.closed = true
	delete(s.d.streams, s)
	return nil
}

// Event is a point recorded on a simulated stream.
type Event struct {
	d      *Device
	last   *mark // under d.mu
	closed bool
}

// NewEvent makes an event.
func (d *Device) NewEvent() (gpu.Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, d.errClosed("new event")
	}
	e := &Event{d: d}
	d.events[e] = struct{}{}
	return e, nil
}

// Wait returns when the work before the last Record has completed.
func (e *Event) Wait(ctx context.Context) error {
	e.d.mu.Lock()
	if e.closed {
		e.d.mu.Unlock()
		return e.d.errClosed("wait")
	}
	m := e.last
	e.d.mu.Unlock()
	if m == nil {
		return nil
	}
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close releases the event.
func (e *Event) Close() error {
	e.d.mu.Lock()
	defer e.d.mu.Unlock()
	e.closed = true
	delete(e.d.events, e)
	return nil
}

//go:build linux

package cuda

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/psiflow/psiflow/gpu"
)

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

package h2d

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/psiflow/psiflow/gpu"
)

func (r *Ring) getEvent() (gpu.Event, error) {
	r.mu.Lock()
	if n := len(r.events); n > 0 {
		e := r.events[n-1]
		r.events = r.events[:n-1]
		r.mu.Unlock()
		return e, nil
	}
	r.mu.Unlock()
	e, err := r.cfg.Device.NewEvent()
	if err != nil {
		return nil, fmt.Errorf("gpu staging ring %q: %w", r.cfg.Name, err)
	}
	return e, nil
}

func (r *Ring) putEvent(e gpu.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// getBuffer takes a free device buffer of one slot, or allocates one if the
// quota allows; otherwise it waits for a buffer to come back (counted as a
// quota wait).
func (r *Ring) getBuffer(ctx context.Context) (gpu.Ptr, error) {
	var start time.Time
	for {
		r.mu.Lock()
		if n := len(r.bufs); n > 0 {
			p := r.bufs[n-1]
			r.bufs = r.bufs[:n-1]
			r.mu.Unlock()
			r.quota.waited(start)
			return p, nil
		}
		if r.quota.TryAcquire(r.slot) {
			r.mu.Unlock()
			r.quota.waited(start)
			p, err := r.cfg.Device.Alloc(ctx, r.slot)
			if err != nil {
				r.quota.Release(r.slot)
				return 0, fmt.Errorf("gpu staging ring %q: %w", r.cfg.Name, err)
			}
			r.mu.Lock()
			r.nbufs++
			r.mu.Unlock()
			return p, nil
		}
		if r.bufWake == nil {
			r.bufWake = make(chan struct{})
		}
		w := r.bufWake
		r.mu.Unlock()
		if start.IsZero() {
			start = time.Now()
			r.quota.waiting()
		}
		select {
		case <-w:
		case <-ctx.Done():
			return 0, fmt.Errorf("gpu staging ring %q: waiting for device memory (quota %d bytes, all %d buffers hold batches): %w",
				r.cfg.Name, r.quota.Limit(), r.nbufsNow(), ctx.Err())
		}
	}
}

func (r *Ring) nbufsNow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nbufs
}

// PutBuffer returns a device buffer from Copy once the batch in it is no
// longer needed.
func (r *Ring) PutBuffer(p gpu.Ptr) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bufs = append(r.bufs, p)
	if r.bufWake != nil {
		close(r.bufWake)
		r.bufWake = nil
	}
}

func (r *Ring) closeDevice() error {
	var errs []error
	for _, s := range r.streams {
		errs = append(errs, s.Close())
	}
	r.streams = nil
	for _, e := range r.events {
		errs = append(errs, e.Close())
	}
	r.events = nil
	for _, p := range r.bufs {
		errs = append(errs, r.cfg.Device.Free(p))
		r.quota.Release(r.slot)
	}
	r.nbufs -= len(r.bufs)
	r.bufs = nil
	return errors.Join(errs...)
}

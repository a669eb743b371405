package source

import (
	"context"
	"time"
)

// ReadObserver is told of every read a [Reader] completes, for metrics (package
// package metrics implements it with Prometheus counters and a latency histogram).
// ObserveRead is called on the reader's goroutine, so it must be cheap and safe for
// concurrent use by many readers.
type ReadObserver interface {
	// ObserveRead reports one finished read: the backend that did it, the bytes read,
	// the time from Submit to its completion being reaped (queueing included), and
	// the read's error (nil on success; a short read at end of file is a success).
	ObserveRead(backend Backend, n int, latency time.Duration, err error)
}

// observedTag wraps a request's Tag with its submission time.
type observedTag struct {
	tag   any
	start time.Time
}

// observedReader decorates a Reader with a ReadObserver. It is installed by
// [NewReader] only when [ReaderOptions.Observer] is set, so readers without one pay
// nothing.
type observedReader struct {
	Reader
	obs     ReadObserver
	backend Backend
}

func observe(r Reader, obs ReadObserver) Reader {
	return &observedReader{Reader: r, obs: obs, backend: r.Backend()}
}

// Cancel cancels the reads in flight where the reader can.
func (r *observedReader) Cancel() bool {
	c, ok := r.Reader.(canceller)
	return ok && c.Cancel()
}

// UnregisterFixed unregisters the reader's fixed buffers where it has some.
func (r *observedReader) UnregisterFixed() (bool, error) {
	u, ok := r.Reader.(fixedReader)
	if !ok {
		return false, nil
	}
	return u.UnregisterFixed()
}

func (r *observedReader) Submit(req Request) error {
	req.Tag = &observedTag{tag: req.Tag, start: time.Now()}
	if err := r.Reader.Submit(req); err != nil {
		r.obs.ObserveRead(r.backend, 0, 0, err)
		return err
	}
	return nil
}

func (r *observedReader) Reap(ctx context.Context, out []Completion, wait int) (int, error) {
	n, err := r.Reader.Reap(ctx, out, wait)
	now := time.Now()
	for i := range out[:n] {
		c := &out[i]
		if t, ok := c.Tag.(*observedTag); ok {
			c.Tag = t.tag
			r.obs.ObserveRead(r.backend, c.N, now.Sub(t.start), c.Err)
		}
	}
	return n, err
}

// FixedBuffers forwards the io_uring reader's report of READ_FIXED use.
func (r *observedReader) FixedBuffers() bool {
	f, ok := r.Reader.(interface{ FixedBuffers() bool })
	return ok && f.FixedBuffers()
}

package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/psiflow/psiflow/stage"
)

// Workers bounds how many elements are between a [Narrow] stage and their release
// (for the image pipeline: being decoded or queued for decoding). Its limit moves
// between 1 and its maximum while the pipeline runs. Safe for concurrent use.
type Workers struct {
	mu     sync.Mutex
	max    int
	limit  int
	inUse  int
	change chan struct{} // closed and replaced when inUse or limit changes
}

// NewWorkers returns a limiter of max slots, all open.
func NewWorkers(max int) (*Workers, error) {
	if max < 1 {
		return nil, fmt.Errorf("memory: workers %d: must be at least 1", max)
	}
	return &Workers{max: max, limit: max, change: make(chan struct{})}, nil
}

// Max returns the limit at Normal.
func (w *Workers) Max() int { return w.max }

// Limit returns the current limit.
func (w *Workers) Limit() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.limit
}

// InUse returns the slots held.
func (w *Workers) InUse() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inUse
}

// SetLimit moves the limit to n, kept within [1, Max]. Lowering revokes nothing:
// held slots finish, and new ones wait until fewer than n are held.
func (w *Workers) SetLimit(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.limit = min(max(n, 1), w.max)
	w.wakeLocked()
}

func (w *Workers) wakeLocked() {
	close(w.change)
	w.change = make(chan struct{})
}

// Enter waits for a slot or for ctx to end (its error, no slot held).
func (w *Workers) Enter(ctx context.Context) error {
	for {
		w.mu.Lock()
		if w.inUse < w.limit {
			w.inUse++
			w.mu.Unlock()
			return nil
		}
		ch := w.change
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("memory: waiting for a worker slot: %w", ctx.Err())
		}
	}
}

// Leave gives back a slot taken by Enter. Leaving without a slot panics: it is a
// double release.
func (w *Workers) Leave() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.inUse <= 0 {
		panic("memory: Workers.Leave without a slot held")
	}
	w.inUse--
	w.wakeLocked()
}

// Held is an element that holds a [Workers] slot; releasing it releases the element
// (if it is a stage.Releaser) and gives the slot back, once.
type Held[T any] struct {
	V    T
	w    *Workers
	once sync.Once
}

// Release releases the element and the slot. Later calls do nothing.
func (h *Held[T]) Release() {
	h.once.Do(func() {
		if r, ok := any(h.V).(stage.Releaser); ok {
			r.Release() // the element inside: the graph knows only the Held
		}
		h.w.Leave()
	})
}

// Narrow returns a stage that admits each element only once a slot of w is free and
// wraps it in a [Held]; the slot is given back when the Held is released (for the
// decode stage: as soon as the element is decoded). Placed before a stage of
// w.Max() workers, it narrows that stage to w.Limit() elements at a time.
func Narrow[T any](name string, w *Workers) stage.Stage[T, *Held[T]] {
	return stage.New(name, func(ctx context.Context, in stage.In[T], out stage.Out[*Held[T]]) error {
		for {
			e, ok := in.Recv(ctx)
			if !ok {
				return nil
			}
			// Waiting for a slot is waiting for the stage downstream: it counts as
			// time waiting on output, not as busy time.
			t0 := time.Now()
			err := w.Enter(ctx)
			out.Metrics().WaitOut.Add(int64(time.Since(t0)))
			if err != nil {
				in.Discard(e)
				return err
			}
			if err := out.Send(ctx, stage.Envelope[*Held[T]]{Value: &Held[T]{V: e.Value, w: w}, Claim: e.Claim}); err != nil {
				return err
			}
		}
	})
}

package h2d

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/uma"
)

// Slot is one staging slot holding a batch, from [Ring.Acquire] until
// [Slot.Finish] (or Release, which the graph calls).
type Slot struct {
	r    *Ring
	s    *slotState
	n    int64
	tx   *uma.Transfer
	ev   gpu.Event
	done atomic.Bool // the copy is known complete: later waits make no driver call
	// finished is set once the slot went back to the ring (Finish or Release).
	finished atomic.Bool
	once     sync.Once
}

// Bytes is the whole slot, to collate a batch into; it stays valid until
// Finish. The slot is registered with the device.
func (s *Slot) Bytes() []byte {
	return s.s.reg.Bytes()
}

// Index is the slot's index in the ring.
func (s *Slot) Index() int { return s.s.i }

// Copy copies the first n bytes of the slot to a device buffer: it takes a
// buffer from the pool (allocating one under the quota, waiting while the
// quota is full), locks the slot for the transfer in UMA (LOCKED_TX),
// enqueues the asynchronous copy on the next stream and records an event
// after it. It returns at once; the copy is complete when Wait returns.
func (s *Slot) Copy(ctx context.Context, n int64) (gpu.Ptr, error) {
	r := s.r
	if n <= 0 || n > r.slot {
		return 0, fmt.Errorf("gpu staging ring %q: copy of %d bytes from a slot of %d", r.cfg.Name, n, r.slot)
	}
	if s.tx != nil {
		return 0, fmt.Errorf("gpu staging ring %q: slot %d is already being copied", r.cfg.Name, s.s.i)
	}
	buf, err := r.getBuffer(ctx)
	if err != nil {
		return 0, err
	}
	ev, err := r.getEvent()
	if err != nil {
		r.PutBuffer(buf)
		return 0, err
	}
	tx, err := r.arena.BeginTransfer(ctx, s.s.off, n)
	if err != nil {
		r.putEvent(ev)
		r.PutBuffer(buf)
		return 0, fmt.Errorf("gpu staging ring %q: slot %d: %w", r.cfg.Name, s.s.i, err)
	}
	r.mu.Lock()
	st := r.streams[r.next%len(r.streams)]
	r.next++
	r.mu.Unlock()
	if err := st.CopyToDevice(buf, tx.Bytes()); err != nil {
		tx.Done(false)
		r.putEvent(ev)
		r.PutBuffer(buf)
		return 0, err
	}
	if err := st.Record(ev); err != nil {
		// The copy is enqueued but cannot be waited for: wait for the stream.
		_ = st.Synchronize(context.Background())
		tx.Done(false)
		r.putEvent(ev)
		r.PutBuffer(buf)
		return 0, err
	}
	s.tx, s.ev, s.n = tx, ev, n
	r.mu.Lock()
	r.stats.Copies++
	r.stats.CopyBytes += n
	r.mu.Unlock()
	return buf, nil
}

// Wait returns when the slot's copy has completed (at once if none was made).
// Once a wait succeeded, later ones make no driver call.
func (s *Slot) Wait(ctx context.Context) error {
	if s.ev == nil || s.done.Load() {
		return nil
	}
	if err := s.ev.Wait(ctx); err != nil {
		return err
	}
	s.done.Store(true)
	return nil
}

// Finish waits for the copy, ends the transfer (the slot's chunk becomes
// COPIED_GPU), and returns the slot to the ring: still registered while the
// ring needs it (KeepRegistered, or the recent peak of slots in use), else
// per AfterCopy (unregistered from the device and the ledger, then
// PREEMPTIBLE or EVICTED). A second Finish
// does nothing. If ctx ends first, it returns ctx's error and the slot stays
// out until Release.
func (s *Slot) Finish(ctx context.Context) error {
	if err := s.Wait(ctx); err != nil {
		return err
	}
	var err error
	s.once.Do(func() { err = s.r.finish(s, true) })
	return err
}

// Release finishes the slot if nothing did (waiting for a pending copy
// first, so that the slot is never reused under a DMA); a failure is kept
// for [Ring.Err]. The graph calls it; it makes a Slot a stage.Releaser.
func (s *Slot) Release() {
	if err := s.Wait(context.Background()); err != nil {
		s.r.fail(err)
	}
	s.once.Do(func() {
		if err := s.r.finish(s, s.tx != nil); err != nil {
			s.r.fail(err)
		}
	})
}

package flow

import (
	"context"
	"errors"
	"fmt"

	"github.com/psiflow/psiflow/stage"
)

// Emitter is a source's output port. A source produces an element in two
// phases: [Emitter.Reserve] takes a gate permit (if the graph has a [Gate])
// and then n bytes of budget (if it has a [Budget]); only then does the source
// take buffers and read, and [Emitter.Emit] submits the element with the
// reservation attached. An Emitter is used by one goroutine.
type Emitter[T any] struct {
	g       *Graph
	out     stage.Out[T]
	sized   bool
	permit  bool
	claim   *stage.Claim
	pending bool // Reserve succeeded and Emit has not yet consumed it
}

// Reserve waits for a gate permit and then n bytes of the graph's budget, and
// holds both for the next Emit. It returns ctx's error, or [*ErrOversize], with
// nothing held. Calling Reserve twice without Emit is an error.
func (e *Emitter[T]) Reserve(ctx context.Context, n int64) error {
	if e.pending {
		return errors.New("flow: Reserve called twice without Emit")
	}
	if e.g.gate != nil {
		if err := e.g.gate.Acquire(ctx); err != nil {
			return err
		}
		e.permit = true
	}
	if e.g.budget != nil && n > 0 {
		if err := e.g.budget.Acquire(ctx, n); err != nil {
			e.releasePermit()
			return err
		}
		e.claim = stage.NewClaim(e.g.budget, n)
	}
	e.pending = true
	return nil
}

// Emit sends v downstream with the bytes reserved by the last Reserve. Without
// a prior Reserve, Emit reserves first: [stage.Sized] values reserve their
// size, others only a gate permit. The gate permit is released once v is
// queued. If ctx ends, v is discarded and ctx's error returned.
func (e *Emitter[T]) Emit(ctx context.Context, v T) error {
	if !e.pending {
		var n int64
		if e.sized {
			n = stage.SizeOf(v)
		}
		if err := e.Reserve(ctx, n); err != nil {
			stage.Discard(stage.Envelope[T]{Value: v})
			return err
		}
	}
	c := e.claim
	e.claim, e.pending = nil, false
	err := e.out.Send(ctx, stage.Envelope[T]{Value: v, Claim: c})
	e.releasePermit()
	return err
}

// EmitAdmitted sends v downstream without a gate permit or budget bytes of its own:
// for an element that its producer has already charged to the budget and whose
// production already passed the gate (a read that took a permit for itself, as the
// gated readers of source/flowsrc do). Asking the gate again for data already read
// would hold its buffers while the gate is closed, and the reads whose permits are
// released only as their results are taken would never complete. If ctx ends, v is
// discarded and ctx's error returned. Calling it after Reserve is an error.
func (e *Emitter[T]) EmitAdmitted(ctx context.Context, v T) error {
	if e.pending {
		stage.Discard(stage.Envelope[T]{Value: v})
		return errors.New("flow: EmitAdmitted called after Reserve")
	}
	return e.out.Send(ctx, stage.Envelope[T]{Value: v})
}

// Skipped counts n inputs the source dropped under its skip policy in its stage's
// counters (Skipped, psiflow_stage_skipped_total); the source names each itself.
func (e *Emitter[T]) Skipped(n int64) {
	if m := e.out.Metrics(); m != nil {
		m.Skipped.Add(n)
	}
}

// Cancel gives back a reservation that will not be emitted.
func (e *Emitter[T]) Cancel() {
	e.claim.Drop()
	e.claim, e.pending = nil, false
	e.releasePermit()
}

func (e *Emitter[T]) releasePermit() {
	if e.permit {
		e.permit = false
		e.g.gate.Release()
	}
}

// Source adds a source named name that runs produce, which emits elements
// through the [Emitter] until it has no more and returns nil, or fails and
// returns an error. produce must return promptly once ctx is done.
func Source[T any](g *Graph, name string, produce func(ctx context.Context, out *Emitter[T]) error, opts ...NodeOption) Stream[T] {
	cfg := configure(opts)
	out := newStream[T](g, name, cfg.queueSize)
	n := &node{name: name, kind: "source"}
	g.addNode(n)
	n.run = func(ctx context.Context) error {
		em := &Emitter[T]{g: g, out: stage.NewOut(out.ch, n.metrics), sized: stage.MaySize[T]()}
		defer em.Cancel()
		return produce(ctx, em)
	}
	n.closeOutputs = func() { close(out.ch) }
	return out
}

// FromSlice is a source that emits the elements of vs in order.
func FromSlice[T any](g *Graph, name string, vs []T, opts ...NodeOption) Stream[T] {
	return Source(g, name, func(ctx context.Context, out *Emitter[T]) error {
		for _, v := range vs {
			if err := out.Emit(ctx, v); err != nil {
				return err
			}
		}
		return nil
	}, opts...)
}

// FromChan is a source that emits what arrives on ch until it is closed.
// On cancellation it stops reading; ch is left to its owner.
func FromChan[T any](g *Graph, name string, ch <-chan T, opts ...NodeOption) Stream[T] {
	return Source(g, name, func(ctx context.Context, out *Emitter[T]) error {
		for {
			select {
			case v, ok := <-ch:
				if !ok {
					return nil
				}
				if err := out.Emit(ctx, v); err != nil {
					return err
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}, opts...)
}

// Collect is a sink that appends every element to *dst. Budget bytes are
// returned as elements arrive; the values' resources ([stage.Releaser]
// values, a batch's members) pass to the caller with the values and are not
// released by the graph. It is meant for tests and small results.
func Collect[T any](in Stream[T], name string, dst *[]T) {
	addSink(in, name, "flow.Collect", func(_ context.Context, _ stage.In[T], e stage.Envelope[T]) error {
		stage.Detach(e.Claim)
		e.Claim.Drop()
		*dst = append(*dst, e.Value)
		return nil
	})
}

// String describes the emitter for debugging.
func (e *Emitter[T]) String() string {
	return fmt.Sprintf("flow.Emitter[%T]{pending: %v}", *new(T), e.pending)
}

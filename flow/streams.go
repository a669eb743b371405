package flow

import (
	"context"
	"fmt"

	streams "github.com/reugn/go-streams"

	"github.com/psiflow/psiflow/stage"
)

// TypeError reports a go-streams element whose dynamic type is not the one
// the typed side of the adapter expects.
type TypeError struct {
	Index int64  // position of the element in the go-streams stream, from 0
	Got   string // the element's dynamic type
	Want  string // the expected type
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("go-streams element %d is %s, want %s", e.Index, e.Got, e.Want)
}

// FromOutlet is a typed source reading a go-streams Outlet (a Source or a
// Flow). An element of another type than T fails the graph with a
// [*TypeError] instead of panicking. When the graph ends early (error or
// cancellation), the outlet is drained until go-streams closes it, so its
// goroutines, which block on unbuffered sends, can end; the outlet must
// therefore close once its own input ends, as go-streams components do.
func FromOutlet[T any](g *Graph, name string, outlet streams.Outlet, opts ...NodeOption) Stream[T] {
	return Source(g, name, func(ctx context.Context, out *Emitter[T]) error {
		ch := outlet.Out()
		defer drainAny(ch)
		var i int64
		for {
			select {
			case x, ok := <-ch:
				if !ok {
					return nil
				}
				v, ok := x.(T)
				if !ok {
					return &TypeError{Index: i, Got: fmt.Sprintf("%T", x), Want: fmt.Sprintf("%T", *new(T))}
				}
				i++
				if err := out.Emit(ctx, v); err != nil {
					return err
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}, opts...)
}

// drainAny reads ch until it is closed, releasing what it finds.
func drainAny(ch <-chan any) {
	for x := range ch {
		if r, ok := x.(stage.Releaser); ok {
			r.Release()
		}
	}
}

// ToInlet is a sink that hands every element of in to a go-streams Inlet (a
// Flow or a Sink) and closes the inlet's channel at the end, also on error or
// cancellation, so the go-streams side ends too. Elements pass as values of
// type T; their budget claims are dropped at the hand-off, and ownership of
// [stage.Releaser] values passes to go-streams. When inlet is a
// go-streams Sink, ToInlet also waits for its AwaitCompletion.
func ToInlet[T any](in Stream[T], name string, inlet streams.Inlet) {
	g := in.g
	if g == nil {
		panic(fmt.Sprintf("flow.ToInlet(%q): input stream is the zero Stream", name))
	}
	in.consume(name)
	n := &node{name: name, kind: "sink"}
	g.addNode(n)
	n.run = func(ctx context.Context) error {
		port := stage.NewIn(in.ch, n.metrics)
		ch := inlet.In()
		defer func() {
			close(ch)
			if s, ok := inlet.(streams.Sink); ok {
				s.AwaitCompletion()
			}
		}()
		for {
			e, ok := port.Recv(ctx)
			if !ok {
				return nil
			}
			select {
			case ch <- e.Value:
				// Ownership of the value's resources passed to go-streams.
				stage.Detach(e.Claim)
				e.Claim.Drop()
			case <-ctx.Done():
				port.Discard(e)
				return ctx.Err()
			}
		}
	}
}

// ViaFlow runs the elements of in through a go-streams Flow and returns its
// output as a typed stream of O. It is ToInlet and FromOutlet joined: an
// output element of another type fails the graph with a [*TypeError]; on early
// end the flow's input is closed and its output drained.
func ViaFlow[I, O any](in Stream[I], name string, f streams.Flow, opts ...NodeOption) Stream[O] {
	ToInlet(in, name+".in", f)
	return FromOutlet[O](in.g, name+".out", f, opts...)
}

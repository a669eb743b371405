package flow

import (
	"context"
	"fmt"
	"sync"

	"github.com/psiflow/psiflow/stage"
)

// Broadcast sends every element of in to each of n outputs. Each copy holds
// a reference to the element's claim, so its bytes come back when the last
// copy ends. Values that are [stage.Releaser]s must also be
// [stage.Retainer]s, since the graph releases each copy; a Broadcast of
// values that cannot be retained is reported by Run.
//
//	in:    -- 1 -- 2 --|
//	Broadcast(2)
//	out 0: -- 1 -- 2 --|
//	out 1: -- 1 -- 2 --|
func Broadcast[T any](in Stream[T], name string, n int, opts ...NodeOption) []Stream[T] {
	return fanOut(in, name, n, "broadcast", opts, func(ctx context.Context, e stage.Envelope[T], outs []stage.Out[T], _ *int) error {
		copies := stage.Copies(e, len(outs))
		for i, o := range outs {
			if err := o.Send(ctx, copies[i]); err != nil {
				// Send discarded the copy for output i; discard the ones not yet sent.
				for _, c := range copies[i+1:] {
					stage.Discard(c)
				}
				return err
			}
		}
		return nil
	})
}

// RoundRobin sends the elements of in to n outputs in turn: element k goes to
// output k mod n, waiting for room there.
//
//	in:    -- 1 -- 2 -- 3 --|
//	RoundRobin(2)
//	out 0: -- 1 ------- 3 --|
//	out 1: ------- 2 -------|
func RoundRobin[T any](in Stream[T], name string, n int, opts ...NodeOption) []Stream[T] {
	return fanOut(in, name, n, "round-robin", opts, func(ctx context.Context, e stage.Envelope[T], outs []stage.Out[T], next *int) error {
		o := outs[*next]
		*next = (*next + 1) % len(outs)
		return o.Send(ctx, e)
	})
}

func fanOut[T any](in Stream[T], name string, n int, kind string, opts []NodeOption,
	send func(ctx context.Context, e stage.Envelope[T], outs []stage.Out[T], next *int) error) []Stream[T] {
	g := in.g
	if g == nil {
		panic(fmt.Sprintf("flow: %s %q: input stream is the zero Stream", kind, name))
	}
	if n < 1 {
		g.errorf("graph %q: %s %q: %d outputs; need at least 1", g.name, kind, name, n)
		n = 1
	}
	if kind == "broadcast" && n > 1 && stage.MayRelease[T]() {
		var zero T
		if _, ok := any(zero).(stage.Retainer); !ok && !isInterface[T]() {
			g.errorf("graph %q: broadcast %q: %T values are Releasers but not Retainers", g.name, name, zero)
		}
	}
	cfg := configure(opts)
	in.consume(name)
	outs := make([]Stream[T], n)
	for i := range outs {
		outs[i] = newStream[T](g, fmt.Sprintf("%s[%d]", name, i), cfg.queueSize)
	}
	nd := &node{name: name, kind: kind}
	g.addNode(nd)
	nd.run = func(ctx context.Context) error {
		port := stage.NewIn(in.ch, nd.metrics)
		ports := make([]stage.Out[T], n)
		for i := range outs {
			ports[i] = stage.NewOut(outs[i].ch, nd.metrics)
		}
		next := 0
		for {
			e, ok := port.Recv(ctx)
			if !ok {
				return nil
			}
			if err := send(ctx, e, ports, &next); err != nil {
				return err
			}
		}
	}
	nd.closeOutputs = func() {
		for _, o := range outs {
			close(o.ch)
		}
	}
	return outs
}

// Merge interleaves the elements of ins into one stream, in arrival order;
// the order within each input is kept.
//
//	in 0: -- 1 ------- 3 --|
//	in 1: ------- 2 -------|
//	Merge
//	out:  -- 1 -- 2 -- 3 --|
//
// Like every step, it takes its input first and its name second; the inputs
// come as a slice. It panics only when given no input stream at all, since
// there is then no graph to report the mistake to.
func Merge[T any](ins []Stream[T], name string, opts ...NodeOption) Stream[T] {
	if len(ins) == 0 || ins[0].g == nil {
		panic(fmt.Sprintf("flow.Merge(%q): no input streams", name))
	}
	g := ins[0].g
	cfg := configure(opts)
	for _, s := range ins {
		if s.g != g {
			g.errorf("graph %q: merge %q: inputs come from different graphs", g.name, name)
			return newStream[T](g, name, cfg.queueSize)
		}
		s.consume(name)
	}
	out := newStream[T](g, name, cfg.queueSize)
	nd := &node{name: name, kind: "merge"}
	g.addNode(nd)
	nd.run = func(ctx context.Context) error {
		nd.metrics.Workers.Store(int64(len(ins)))
		o := stage.NewOut(out.ch, nd.metrics)
		var wg sync.WaitGroup
		errs := make(chan error, len(ins))
		for _, s := range ins {
			wg.Add(1)
			go func() {
				defer wg.Done()
				port := stage.NewIn(s.ch, nd.metrics)
				for {
					e, ok := port.Recv(ctx)
					if !ok {
						return
					}
					if err := o.Send(ctx, e); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	nd.closeOutputs = func() { close(out.ch) }
	return out
}

func isInterface[T any]() bool {
	var zero T
	return any(zero) == nil
}

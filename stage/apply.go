package stage

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
)

// ownership says who ends a map input's resources once the function returns.
type ownership int

const (
	// graphReleases: the graph releases them, unless the function called Keep.
	graphReleases ownership = iota
	// functionOwns: the function owns its input (the deprecated rule of Map,
	// ParMap and OrderedParMap); the graph only forgets them.
	functionOwns
)

// mapStage is the one implementation behind every map: [Apply], and the
// deprecated [Map], [ParMap] and [OrderedParMap].
type mapStage[I, O any] struct {
	name    string
	workers int
	ordered bool
	own     ownership
	f       func(ctx context.Context, v I) (O, error)
}

// Apply returns a stage that applies f to every element on workers
// goroutines at once; with ordered, results leave in input order (a result
// ready before its predecessors waits for them, counted as waiting on
// output), otherwise in completion order. Each output keeps its input's
// claim, so the input's budget bytes travel on with it.
//
// The input's resources are released by the graph as soon as f returns, and
// also when f fails; f never releases them. If the output shares the input's
// memory, f calls [Keep] and they are released with the output instead. An
// output that is a [Releaser] is released by the graph when its life ends.
//
// An error that is a [*SkipError] drops the element and goes on (see
// [SkipPolicy]); any other error stops the stage. The deprecated maps do the same.
//
// workers < 1 is reported when the stage is added to a graph.
//
//	in:  -- 1 -- 2 -- 3 --|
//	Apply(x => x*10, 2 workers, ordered)
//	out: -- 10 - 20 - 30 -|
func Apply[I, O any](name string, workers int, ordered bool, f func(ctx context.Context, v I) (O, error)) Stage[I, O] {
	return &mapStage[I, O]{name: name, workers: workers, ordered: ordered, f: f}
}

// Map applies f to every element, in order, one at a time. The output keeps
// the input's claim. f owns its input: it must release it or carry it into
// its output.
//
// Deprecated: use flow.Map (or [Apply]), under which the graph releases the
// input and f never does.
func Map[I, O any](name string, f func(ctx context.Context, v I) (O, error)) Stage[I, O] {
	return &mapStage[I, O]{name: name, workers: 1, ordered: true, own: functionOwns, f: f}
}

// ParMap applies f to elements on workers goroutines at once and sends the
// results in the order they complete. f owns its input, as with [Map].
//
// Deprecated: use flow.Map (or [Apply]), under which the graph releases the
// input and f never does.
func ParMap[I, O any](name string, workers int, f func(ctx context.Context, v I) (O, error)) Stage[I, O] {
	return &mapStage[I, O]{name: name, workers: workers, own: functionOwns, f: f}
}

// OrderedParMap applies f to elements on workers goroutines at once and
// sends the results in input order. f owns its input, as with [Map].
//
// Deprecated: use flow.OrderedMap (or [Apply]), under which the graph
// releases the input and f never does.
func OrderedParMap[I, O any](name string, workers int, f func(ctx context.Context, v I) (O, error)) Stage[I, O] {
	return &mapStage[I, O]{name: name, workers: workers, ordered: true, own: functionOwns, f: f}
}

// Name returns the stage's name.
func (s *mapStage[I, O]) Name() string { return s.name }

// Validate reports a configuration that cannot run.
func (s *mapStage[I, O]) Validate() error {
	switch {
	case s.workers < 1:
		return fmt.Errorf("workers %d: must be at least 1", s.workers)
	case s.f == nil:
		return fmt.Errorf("no function")
	}
	return nil
}

// Run runs the workers.
func (s *mapStage[I, O]) Run(ctx context.Context, in In[I], out Out[O]) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.workers == 1 {
		return s.loop(ctx, in, out, nil)
	}
	in.Metrics().Workers.Store(int64(s.workers))
	var seq *sequencer
	if s.ordered {
		seq = newSequencer()
	}
	g, gctx := errgroup.WithContext(ctx)
	for range s.workers {
		g.Go(func() error {
			// Each worker selects on its own Done channel, not one shared by all.
			wctx, cancel := context.WithCancel(gctx)
			defer cancel()
			return Protect(s.name, func() error { return s.loop(wctx, in, out, seq) })
		})
	}
	return g.Wait()
}

// loop is one worker: take an element (and its turn, when ordered), apply f,
// settle the input's resources, send the result.
func (s *mapStage[I, O]) loop(ctx context.Context, in In[I], out Out[O], seq *sequencer) error {
	fctx, k := withKeeper(ctx)
	release := s.own == graphReleases
	outRelease := MayRelease[O]()
	var busy *Claim // the claim of the element f is working on, ended if f panics
	defer func() {
		if busy != nil {
			busy.settle(release)
			busy.Drop()
		}
	}()
	for {
		var e Envelope[I]
		var ok bool
		var mine, next chan struct{}
		if seq != nil {
			e, ok, mine, next = take(seq, ctx, in)
		} else {
			e, ok = in.Recv(ctx)
		}
		if !ok {
			return nil
		}
		k.kept = false
		busy = e.Claim
		v, err := s.f(fctx, e.Value)
		busy = nil
		if err != nil {
			e.Claim.settle(release)
			e.Claim.Drop()
			if asSkip(err, in.Metrics()) {
				// A skipped element is dropped and counted; in order, it passes
				// its turn on.
				if seq != nil {
					if !seq.wait(ctx, in.Metrics(), mine) {
						return nil
					}
					close(next)
				}
				continue
			}
			return err
		}
		c := e.Claim
		same := false
		if outRelease && c != nil {
			if r, ok := any(v).(Releaser); ok {
				same = c.owns(r) // f returned its input: it travels on as it is
			}
		}
		if c != nil && !k.kept && !same {
			c.settle(release)
		}
		if seq != nil {
			if !seq.wait(ctx, in.Metrics(), mine) {
				Discard(Envelope[O]{Value: v, Claim: c})
				return nil
			}
		}
		err = out.Send(ctx, Envelope[O]{Value: v, Claim: c, held: same})
		if next != nil {
			close(next)
		}
		if err != nil {
			return err
		}
	}
}

// sequencer hands out elements with a turn each, so that workers send their
// results in input order.
type sequencer struct {
	mu   sync.Mutex // serialises taking an input and its turn
	turn chan struct{}
}

func newSequencer() *sequencer {
	s := &sequencer{turn: make(chan struct{})}
	close(s.turn) // the first element's predecessor is done
	return s
}

// take receives the next element of in with mine, closed when its
// predecessor has been sent, and next, to close once it has been sent itself.
func take[I any](s *sequencer, ctx context.Context, in In[I]) (e Envelope[I], ok bool, mine, next chan struct{}) {
	if !s.mu.TryLock() {
		t0 := nanotime()
		s.mu.Lock()
		in.Metrics().WaitIn.Add(nanotime() - t0)
	}
	defer s.mu.Unlock()
	e, ok = in.Recv(ctx)
	if !ok {
		return e, false, nil, nil
	}
	mine, next = s.turn, make(chan struct{})
	s.turn = next
	return e, true, mine, next
}

// wait waits for mine (the predecessor's send), counting the time as waiting
// on output; it returns false if ctx ended first.
func (s *sequencer) wait(ctx context.Context, m *Metrics, mine chan struct{}) bool {
	select {
	case <-mine:
		return true
	default:
	}
	t0 := nanotime()
	defer func() { m.WaitOut.Add(nanotime() - t0) }()
	select {
	case <-mine:
		return true
	case <-ctx.Done():
		return false
	}
}

package stage

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// funcStage adapts a run function to [Stage].
type funcStage[I, O any] struct {
	name string
	run  func(ctx context.Context, in In[I], out Out[O]) error
}

func (s funcStage[I, O]) Name() string { return s.name }

func (s funcStage[I, O]) Run(ctx context.Context, in In[I], out Out[O]) error {
	return s.run(ctx, in, out)
}

// New returns a stage named name that runs run. It is the way to write a
// stage the combinators do not cover; run follows the [Stage] contract.
func New[I, O any](name string, run func(ctx context.Context, in In[I], out Out[O]) error) Stage[I, O] {
	return funcStage[I, O]{name: name, run: run}
}

// Map applies f to every element, in order, one at a time. The output keeps
// the input's claim. f owns its input (see [Releaser]). An error that is a
// [*SkipError] drops the element and goes on (see [SkipPolicy]); any other
// error stops the stage. ParMap and OrderedParMap do the same.
//
//	in:  -- 1 -- 2 -- 3 --|
//	Map(x => x*10)
//	out: -- 10 - 20 - 30 -|
func Map[I, O any](name string, f func(ctx context.Context, v I) (O, error)) Stage[I, O] {
	return New(name, func(ctx context.Context, in In[I], out Out[O]) error {
		for {
			e, ok := in.Recv(ctx)
			if !ok {
				return nil
			}
			v, err := f(ctx, e.Value)
			if err != nil {
				e.Claim.Drop()
				if asSkip(err, in.Metrics()) {
					continue
				}
				return err
			}
			if err := out.Send(ctx, Envelope[O]{Value: v, Claim: e.Claim}); err != nil {
				return err
			}
		}
	})
}

// Filter passes on the elements for which keep returns true, in order. A
// dropped element's claim is returned and its value released.
//
//	in:  -- 1 -- 2 -- 3 -- 4 --|
//	Filter(even)
//	out: ------- 2 ------- 4 --|
func Filter[T any](name string, keep func(ctx context.Context, v T) (bool, error)) Stage[T, T] {
	return New(name, func(ctx context.Context, in In[T], out Out[T]) error {
		for {
			e, ok := in.Recv(ctx)
			if !ok {
				return nil
			}
			k, err := keep(ctx, e.Value)
			if err != nil {
				in.Discard(e)
				return err
			}
			if !k {
				in.Discard(e)
				continue
			}
			if err := out.Send(ctx, e); err != nil {
				return err
			}
		}
	})
}

// FlatMap calls f for every element; f emits zero or more outputs, which are
// sent downstream as they are emitted (nothing is collected in a slice). The
// outputs share the input's claim, which is returned when the last of them is
// done; with no outputs it is returned at once. f owns its input.
//
//	in:  -- "a b" ------ "c" --|
//	FlatMap(split)
//	out: -- "a" - "b" -- "c" --|
func FlatMap[I, O any](name string, f func(ctx context.Context, v I, emit func(O) error) error) Stage[I, O] {
	return New(name, func(ctx context.Context, in In[I], out Out[O]) error {
		for {
			e, ok := in.Recv(ctx)
			if !ok {
				return nil
			}
			err := f(ctx, e.Value, func(v O) error {
				return out.Send(ctx, Envelope[O]{Value: v, Claim: e.Claim.Retain()})
			})
			e.Claim.Drop()
			if err != nil {
				return err
			}
		}
	})
}

// Tap calls observe for every element and passes it on unchanged.
//
//	in:  -- 1 -- 2 --|
//	Tap(log)
//	out: -- 1 -- 2 --|
func Tap[T any](name string, observe func(v T)) Stage[T, T] {
	return New(name, func(ctx context.Context, in In[T], out Out[T]) error {
		for {
			e, ok := in.Recv(ctx)
			if !ok {
				return nil
			}
			observe(e.Value)
			if err := out.Send(ctx, e); err != nil {
				return err
			}
		}
	})
}

// Batch groups elements into slices of size elements, in order. When maxWait
// is positive, a partial batch is also sent once maxWait has passed since its
// first element arrived; at the end of input the last partial batch is sent.
// A batch holds the claims of all its members.
//
// A batch that holds all of a graph's budget while a source waits for more
// budget would wait forever: nothing else can return bytes. Batch notices
// this (checking every 100 ms while it waits for input) and fails with an
// error that gives the numbers, instead of hanging.
//
//	in:  -- 1 - 2 - 3 - 4 - 5 --|
//	Batch(size 2)
//	out: ------ [1 2] - [3 4] - [5]|
func Batch[T any](name string, size int, maxWait time.Duration) Stage[T, []T] {
	return New(name, func(ctx context.Context, in In[T], out Out[[]T]) error {
		if size < 1 {
			return fmt.Errorf("batch size %d: must be at least 1", size)
		}
		values := make([]T, 0, size)
		claims := make([]*Claim, 0, size)
		held := map[*Claim]struct{}{} // distinct claims (flat-map outputs share one)
		var heldBytes int64
		flush := func() error {
			if len(values) == 0 {
				return nil
			}
			b := Envelope[[]T]{Value: values, Claim: JoinClaims(claims)}
			values = make([]T, 0, size)
			claims = claims[:0]
			clear(held)
			heldBytes = 0
			return out.Send(ctx, b)
		}
		var timer *time.Timer
		var timeout <-chan time.Time
		if maxWait > 0 {
			timer = time.NewTimer(maxWait)
			timer.Stop()
			defer timer.Stop()
		}
		var budget BudgetInspector
		var stall <-chan time.Time
		defer func() {
			// On cancellation or error, what was gathered is discarded.
			for i := range values {
				in.Discard(Envelope[T]{Value: values[i], Claim: claims[i]})
			}
		}()
		for {
			var e Envelope[T]
			var ok bool
			select {
			case e, ok = <-in.C():
			default:
				t0 := nanotime()
			wait:
				select {
				case e, ok = <-in.C():
				case <-timeout:
					in.Waited(time.Duration(nanotime() - t0))
					timeout = nil
					if err := flush(); err != nil {
						return err
					}
					continue
				case <-stall:
					if heldBytes > 0 && budget.InUse() == heldBytes {
						if n := budget.Waiting(); n > budget.Limit()-heldBytes {
							return fmt.Errorf("deadlock: this batch holds %d of the budget's %d bytes in %d of %d elements, and a source waits for %d bytes that only this batch could return; raise the budget above %d bytes or make batches smaller",
								heldBytes, budget.Limit(), len(values), size, n, heldBytes+n)
						}
					}
					goto wait
				case <-ctx.Done():
					in.Waited(time.Duration(nanotime() - t0))
					return nil
				}
				in.Waited(time.Duration(nanotime() - t0))
			}
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return flush()
			}
			in.Count(e)
			values = append(values, e.Value)
			claims = append(claims, e.Claim)
			if c := e.Claim; c != nil {
				if _, dup := held[c]; !dup {
					held[c] = struct{}{}
					heldBytes += c.Bytes()
				}
				if budget == nil {
					if bi, ok := c.owner.(BudgetInspector); ok {
						budget = bi
						t := time.NewTicker(100 * time.Millisecond)
						defer t.Stop()
						stall = t.C
					}
				}
			}
			if timer != nil && len(values) == 1 {
				timer.Reset(maxWait)
				timeout = timer.C
			}
			if len(values) == size {
				if timer != nil {
					timer.Stop()
					timeout = nil
				}
				if err := flush(); err != nil {
					return err
				}
			}
		}
	})
}

// ParMap applies f to elements on workers goroutines at once and sends the
// results in the order they complete. Each output keeps its input's claim.
//
//	in:  -- 1 -- 2 -- 3 --|
//	ParMap(slow on 1, workers 2)
//	out: ------ 20 - 30 - 10 --|
func ParMap[I, O any](name string, workers int, f func(ctx context.Context, v I) (O, error)) Stage[I, O] {
	return New(name, func(ctx context.Context, in In[I], out Out[O]) error {
		if workers < 1 {
			return fmt.Errorf("workers %d: must be at least 1", workers)
		}
		in.Metrics().Workers.Store(int64(workers))
		g, gctx := errgroup.WithContext(ctx)
		for range workers {
			g.Go(func() error {
				// Each worker selects on its own Done channel, not one shared by all.
				wctx, cancel := context.WithCancel(gctx)
				defer cancel()
				return Protect(name, func() error {
					for {
						e, ok := in.Recv(wctx)
						if !ok {
							return nil
						}
						v, err := f(wctx, e.Value)
						if err != nil {
							e.Claim.Drop()
							if asSkip(err, in.Metrics()) {
								continue
							}
							return err
						}
						if err := out.Send(wctx, Envelope[O]{Value: v, Claim: e.Claim}); err != nil {
							return err
						}
					}
				})
			})
		}
		return g.Wait()
	})
}

// OrderedParMap applies f to elements on workers goroutines at once and
// sends the results in input order. A result that is ready before its
// predecessors waits for them (counted as waiting on output).
//
//	in:  -- 1 -- 2 -- 3 --|
//	OrderedParMap(slow on 1, workers 2)
//	out: ---------- 10 - 20 - 30 --|
func OrderedParMap[I, O any](name string, workers int, f func(ctx context.Context, v I) (O, error)) Stage[I, O] {
	return New(name, func(ctx context.Context, in In[I], out Out[O]) error {
		if workers < 1 {
			return fmt.Errorf("workers %d: must be at least 1", workers)
		}
		m := in.Metrics()
		m.Workers.Store(int64(workers))
		var mu sync.Mutex // serialises taking an input and its turn
		turn := make(chan struct{})
		close(turn) // the first element's predecessor is done
		g, gctx := errgroup.WithContext(ctx)
		for range workers {
			g.Go(func() error {
				return Protect(name, func() error {
					for {
						if !mu.TryLock() {
							t0 := nanotime()
							mu.Lock()
							m.WaitIn.Add(nanotime() - t0)
						}
						e, ok := in.Recv(gctx)
						if !ok {
							mu.Unlock()
							return nil
						}
						mine, next := turn, make(chan struct{})
						turn = next
						mu.Unlock()

						v, err := f(gctx, e.Value)
						if err != nil {
							e.Claim.Drop()
							if !asSkip(err, m) {
								return err
							}
							// a skipped element passes its turn on, in order
							select {
							case <-mine:
							case <-gctx.Done():
								return nil
							}
							close(next)
							continue
						}
						select {
						case <-mine:
						default:
							t0 := nanotime()
							select {
							case <-mine:
							case <-gctx.Done():
								Discard(Envelope[O]{Value: v, Claim: e.Claim})
								return nil
							}
							m.WaitOut.Add(nanotime() - t0)
						}
						err = out.Send(gctx, Envelope[O]{Value: v, Claim: e.Claim})
						close(next)
						if err != nil {
							return err
						}
					}
				})
			})
		}
		return g.Wait()
	})
}

package stage

import (
	"context"
	"fmt"
	"time"
)

// stallConfirm is how many checks in a row must see the same stall before
// Batch reports a deadlock.
const stallConfirm = 3

// stallState is what one check saw of a stall.
type stallState struct{ held, waiting, limit int64 }

// Batch groups elements into slices of size elements, in order. When maxWait
// is positive, a partial batch is also sent once maxWait has passed since its
// first element arrived; at the end of input the last partial batch is sent.
// A batch holds the claims of all its members: its members' resources are
// released by the graph when the batch's life ends (a sink of batches, or a
// map that consumes them such as a collate), never member by member by user
// code. A size below one is reported when the stage is added to a graph.
//
// A batch that holds all of a graph's budget while a source waits for more
// budget would wait forever: nothing else can return bytes. Batch notices
// this (checking every 100 ms while it waits for input; the same stall seen
// at three checks in a row) and fails with an error that gives the numbers,
// instead of hanging.
//
//	in:  -- 1 - 2 - 3 - 4 - 5 --|
//	Batch(size 2)
//	out: ------ [1 2] - [3 4] - [5]|
func Batch[T any](name string, size int, maxWait time.Duration) Stage[T, []T] {
	validate := func() error {
		if size < 1 {
			return fmt.Errorf("batch size %d: must be at least 1", size)
		}
		if maxWait < 0 {
			return fmt.Errorf("batch max wait %v: must be 0 (none) or positive", maxWait)
		}
		return nil
	}
	return funcStage[T, []T]{name: name, validate: validate, run: func(ctx context.Context, in In[T], out Out[[]T]) error {
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
		var lastStall stallState // the stall seen at the last tick
		stallTicks := 0          // ticks in a row that saw it
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
					// A stall is a deadlock only once it has held, unchanged, for
					// stallConfirm ticks in a row: a waiter that gives up on its
					// own (a decode worker decodes on an overdraft after
					// decode.DefaultBudgetWait) must not be taken for one when
					// a loaded machine runs it late.
					stalled := false
					if heldBytes > 0 && budget.InUse() == heldBytes {
						if n := budget.Waiting(); n > budget.Limit()-heldBytes {
							stalled = true
							seen := stallState{held: heldBytes, waiting: n, limit: budget.Limit()}
							if seen != lastStall {
								lastStall, stallTicks = seen, 0
							}
							stallTicks++
						}
					}
					if !stalled {
						lastStall, stallTicks = stallState{}, 0
					}
					if stalled && stallTicks >= stallConfirm {
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
			lastStall, stallTicks = stallState{}, 0 // progress: no stall goes on
			values = append(values, e.Value)
			claims = append(claims, e.Claim)
			if c := e.Claim; c != nil {
				if _, dup := held[c]; !dup {
					held[c] = struct{}{}
					heldBytes += c.Bytes()
				}
				if budget == nil {
					if bi, ok := c.budgetOwner().(BudgetInspector); ok {
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
	}}
}

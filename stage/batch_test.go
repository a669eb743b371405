package stage_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
)

func TestBatchByCountAndTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		feed := make(chan int)
		g := flow.New("t")
		b := flow.Via(flow.FromChan(g, "src", feed), stage.Batch[int]("batch", 3, 100*time.Millisecond))
		type stamped struct {
			at time.Duration
			vs []int
		}
		start := time.Now()
		var got []stamped
		flow.Sink(b, "sink", func(_ context.Context, vs []int) error {
			got = append(got, stamped{time.Since(start), vs})
			return nil
		})
		done := make(chan error, 1)
		go func() { done <- g.Run(context.Background()) }()

		for i := range 4 { // 3 make a full batch at once; the 4th waits for the timer
			feed <- i
		}
		time.Sleep(250 * time.Millisecond) // fake time: the partial batch is flushed at 100 ms
		feed <- 10
		close(feed) // the last partial batch is flushed at the end
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want := []stamped{{0, []int{0, 1, 2}}, {100 * time.Millisecond, []int{3}}, {250 * time.Millisecond, []int{10}}}
		if len(got) != len(want) {
			t.Fatalf("got %v", got)
		}
		for i := range want {
			if got[i].at != want[i].at || len(got[i].vs) != len(want[i].vs) || got[i].vs[0] != want[i].vs[0] {
				t.Fatalf("batch %d: %v, want %v", i, got[i], want[i])
			}
		}
	})
}

func TestFlatMapSharesClaim(t *testing.T) {
	g := flow.New("t", flow.WithBudget(100))
	src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
		if err := out.Reserve(ctx, 100); err != nil { // the whole budget
			return err
		}
		return out.Emit(ctx, 3)
	})
	fm := flow.Via(src, stage.FlatMap("explode", func(_ context.Context, v int, emit func(int) error) error {
		for i := range v {
			if err := emit(i); err != nil {
				return err
			}
		}
		return nil
	}))
	seen := 0
	flow.Sink(fm, "sink", func(context.Context, int) error {
		seen++
		if seen < 3 && g.Budget().InUse() != 100 {
			t.Errorf("claim returned before the last output was consumed (after %d)", seen)
		}
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if seen != 3 || g.Budget().InUse() != 0 {
		t.Fatalf("seen %d, budget in use %d", seen, g.Budget().InUse())
	}
}

func TestBatchHoldingTheWholeBudgetFailsInsteadOfHanging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Budget for 3 elements of 100 bytes, batches of 4: the fourth can
		// never be admitted while the batch holds the first three.
		g := flow.New("t", flow.WithBudget(300))
		src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
			for i := range 10 {
				if err := out.Reserve(ctx, 100); err != nil {
					return err
				}
				if err := out.Emit(ctx, i); err != nil {
					return err
				}
			}
			return nil
		})
		b := flow.Via(src, stage.Batch[int]("batch", 4, 0))
		flow.Sink(b, "sink", func(context.Context, []int) error { return nil })
		err := g.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), `stage "batch": deadlock: this batch holds 300 of the budget's 300 bytes in 3 of 4 elements, and a source waits for 100 bytes`) {
			t.Fatalf("Run returned %v", err)
		}
		if g.Budget().InUse() != 0 {
			t.Fatalf("budget in use %d", g.Budget().InUse())
		}
	})
}

// TestBatchStallThatEndsOnItsOwnIsNoDeadlock: a waiter that gives up after
// 150 ms and goes on beyond the budget (as a decode worker decodes on an
// overdraft) is seen by one check of the stall, not by three in a row, so the
// batch waits for it instead of failing (it failed at the first check before).
func TestBatchStallThatEndsOnItsOwnIsNoDeadlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := flow.New("t", flow.WithBudget(300))
		src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
			for i := range 8 {
				if i%4 == 3 {
					wctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
					err := g.Budget().Acquire(wctx, 100)
					cancel()
					if err == nil {
						return fmt.Errorf("element %d: the budget had room", i)
					}
					g.Budget().Overdraw(100)
					err = out.Emit(ctx, i)
					g.Budget().Release(100)
					if err != nil {
						return err
					}
					continue
				}
				if err := out.Reserve(ctx, 100); err != nil {
					return err
				}
				if err := out.Emit(ctx, i); err != nil {
					return err
				}
			}
			return nil
		})
		b := flow.Via(src, stage.Batch[int]("batch", 4, 0))
		batches := 0
		flow.Sink(b, "sink", func(_ context.Context, v []int) error {
			if len(v) != 4 {
				t.Errorf("batch of %d, want 4", len(v))
			}
			batches++
			return nil
		})
		if err := g.Run(context.Background()); err != nil {
			t.Fatalf("Run = %v, want the batch to wait out the stall", err)
		}
		if batches != 2 || g.Budget().InUse() != 0 {
			t.Fatalf("%d batches, budget in use %d", batches, g.Budget().InUse())
		}
	})
}

func TestBatchWithEnoughBudgetDoesNotTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A slow source (1 s per element) with room for one more element than
		// the batch holds: the stall check must stay quiet.
		g := flow.New("t", flow.WithBudget(500))
		src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
			for i := range 9 {
				time.Sleep(time.Second)
				if err := out.Reserve(ctx, 100); err != nil {
					return err
				}
				if err := out.Emit(ctx, i); err != nil {
					return err
				}
			}
			return nil
		})
		fm := flow.Via(src, stage.FlatMap("dup", func(_ context.Context, v int, emit func(int) error) error {
			if err := emit(v); err != nil {
				return err
			}
			return emit(v) // two outputs share one claim: counted once
		}))
		var got [][]int
		flow.Collect(flow.Via(fm, stage.Batch[int]("batch", 6, 0)), "sink", &got)
		if err := g.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || g.Budget().InUse() != 0 {
			t.Fatalf("got %v, budget in use %d", got, g.Budget().InUse())
		}
	})
}

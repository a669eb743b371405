package flow_test

import (
	"context"
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

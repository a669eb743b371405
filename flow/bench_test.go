package flow_test

import (
	"context"
	"fmt"
	"testing"

	gsext "github.com/reugn/go-streams/extension"
	gsflow "github.com/reugn/go-streams/flow"

	"github.com/psiflow/psiflow/flow"
)

// The per-element overhead benchmarks push b.N integers through five
// identity-like map stages with the same queue size (16) on every side:
// psiflow, a hand-written goroutine-and-channel chain, and go-streams' flow.Map.
const chainStages = 5

func inc(_ context.Context, v int) (int, error) { return v + 1, nil }

func BenchmarkChain5(b *testing.B) {
	b.Run("psiflow", func(b *testing.B) {
		g := flow.New("bench")
		s := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
			for i := range b.N {
				if err := out.Emit(ctx, i); err != nil {
					return err
				}
			}
			return nil
		})
		for i := range chainStages {
			s = flow.Map(s, fmt.Sprint("m", i), 1, inc)
		}
		sum := 0
		flow.Sink(s, "sink", func(_ context.Context, v int) error { sum += v; return nil })
		b.ResetTimer()
		if err := g.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("channels", func(b *testing.B) {
		ctx := context.Background()
		src := make(chan int, flow.DefaultQueueSize)
		go func() {
			defer close(src)
			for i := range b.N {
				src <- i
			}
		}()
		var in <-chan int = src
		for range chainStages {
			out := make(chan int, flow.DefaultQueueSize)
			go func(in <-chan int, out chan<- int) {
				defer close(out)
				for v := range in {
					w, _ := inc(ctx, v)
					out <- w
				}
			}(in, out)
			in = out
		}
		b.ResetTimer()
		sum := 0
		for v := range in {
			sum += v
		}
	})
	b.Run("channels-ctx", func(b *testing.B) {
		// The same chain written as production code would: every send and
		// receive also watches ctx, so the chain can be cancelled.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		src := make(chan int, flow.DefaultQueueSize)
		go func() {
			defer close(src)
			for i := range b.N {
				select {
				case src <- i:
				case <-ctx.Done():
					return
				}
			}
		}()
		var in <-chan int = src
		for range chainStages {
			out := make(chan int, flow.DefaultQueueSize)
			go func(in <-chan int, out chan<- int) {
				defer close(out)
				for {
					var v int
					var ok bool
					select {
					case v, ok = <-in:
					case <-ctx.Done():
						return
					}
					if !ok {
						return
					}
					w, _ := inc(ctx, v)
					select {
					case out <- w:
					case <-ctx.Done():
						return
					}
				}
			}(in, out)
			in = out
		}
		b.ResetTimer()
		sum := 0
		for v := range in {
			sum += v
		}
	})
	b.Run("go-streams", func(b *testing.B) {
		src := make(chan any, flow.DefaultQueueSize)
		go func() {
			defer close(src)
			for i := range b.N {
				src <- i
			}
		}()
		var f = gsext.NewChanSource(src).Via(gsflow.NewMap(func(v int) int { return v + 1 }, 1))
		for range chainStages - 1 {
			f = f.Via(gsflow.NewMap(func(v int) int { return v + 1 }, 1))
		}
		out := make(chan any, flow.DefaultQueueSize)
		b.ResetTimer()
		go f.To(gsext.NewChanSink(out))
		sum := 0
		for v := range out {
			sum += v.(int)
		}
	})
}

// sized is an element that reports its size so the source reserves it.
type sized struct{ buf []byte }

func (s *sized) Size() int64 { return int64(len(s.buf)) }

// BenchmarkBudgetedGraph measures a byte-budgeted graph (budget of 64
// elements, queue 16, three stages) moving elements of several sizes; the
// elements' buffers are reused, so the figure is the graph's cost, not memset.
func BenchmarkBudgetedGraph(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			pool := make(chan *sized, 80)
			for range cap(pool) {
				pool <- &sized{buf: make([]byte, size)}
			}
			g := flow.New("bench", flow.WithBudget(int64(64*size)))
			s := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[*sized]) error {
				for range b.N {
					if err := out.Reserve(ctx, int64(size)); err != nil {
						return err
					}
					if err := out.Emit(ctx, <-pool); err != nil {
						return err
					}
				}
				return nil
			})
			s = flow.Map(s, "touch", 1, func(_ context.Context, v *sized) (*sized, error) { v.buf[0]++; return v, nil })
			s = flow.Map(s, "work", 2, func(_ context.Context, v *sized) (*sized, error) { return v, nil })
			flow.Sink(s, "sink", func(_ context.Context, v *sized) error { pool <- v; return nil })
			b.SetBytes(int64(size))
			b.ResetTimer()
			if err := g.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

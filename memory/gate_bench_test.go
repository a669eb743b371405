package memory

import (
	"context"
	"testing"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/pressure"
)

// benchGraph runs one graph that moves b.N ints from a source to a sink doing work
// units of busy work per element; ns/op is the cost per element in steady state:
// the timer runs from the first emit to the last element consumed, so graph start,
// pressure.Open and the closing of trigger descriptors (the kernel waits for an RCU
// grace period per trigger, about 15 ms each) are not counted.
func benchGraph(b *testing.B, work int, opts []flow.Option, run func(context.Context, *flow.Graph) error) {
	b.Helper()
	g := flow.New("bench", opts...)
	n := b.N
	src := flow.Source(g, "numbers", func(ctx context.Context, out *flow.Emitter[int]) error {
		b.StartTimer()
		for i := range n {
			if err := out.Emit(ctx, i); err != nil {
				return err
			}
		}
		return nil
	})
	var sink uint64
	flow.Sink(src, "spin", func(ctx context.Context, v int) error {
		x := uint64(v)
		for range work {
			x = x*6364136223846793005 + 1442695040888963407
		}
		sink += x
		if v == n-1 {
			b.StopTimer()
		}
		return nil
	})
	b.StopTimer()
	b.ResetTimer()
	if err := run(context.Background(), g); err != nil {
		b.Fatal(err)
	}
	if sink == 1 {
		b.Log(sink)
	}
}

// BenchmarkGraph compares the same graph ungated, gated by a pressure gate at
// Normal, and throttled (gate plus the live monitor on the host's PSI sources).
// work=0 is the worst case (the graph does nothing but move elements); work=1000
// is about a microsecond of work per element.
func BenchmarkGraph(b *testing.B) {
	for _, work := range []int{0, 1000} {
		b.Run("work="+itoa(work)+"/ungated", func(b *testing.B) {
			benchGraph(b, work, nil, runPlain)
		})
		b.Run("work="+itoa(work)+"/gated", func(b *testing.B) {
			gate, err := pressure.NewGate(pressure.Policy{})
			if err != nil {
				b.Fatal(err)
			}
			benchGraph(b, work, []flow.Option{flow.WithGate(gate)}, runPlain)
		})
		b.Run("work="+itoa(work)+"/throttled", func(b *testing.B) {
			rt, err := New(Config{Mode: Fixed, MaxBudget: 1 << 30, Workers: 1, ReadRegistered: -1, Pressure: true})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close()
			benchGraph(b, work, []flow.Option{flow.WithRuntime(rt)}, runPlain)
		})
	}
}

// runPlain runs g (under its runtime, if it has one).
func runPlain(ctx context.Context, g *flow.Graph) error { return g.Run(ctx) }

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

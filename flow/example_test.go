package flow_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
)

// A pipeline of typed stages: read, decode on 4 workers in input order,
// batch, consume.
func Example() {
	g := flow.New("example", flow.WithBudget(1<<20))
	files := flow.Source(g, "read", func(ctx context.Context, out *flow.Emitter[string]) error {
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			// Phase 1 and 2: gate permit and 1 KiB of budget, before reading.
			if err := out.Reserve(ctx, 1024); err != nil {
				return err
			}
			if err := out.Emit(ctx, name+".jpg"); err != nil {
				return err
			}
		}
		return nil
	})
	decoded := flow.Via(files, stage.OrderedParMap("decode", 4, func(_ context.Context, name string) (string, error) {
		return strings.ToUpper(name), nil
	}))
	batches := flow.Via(decoded, stage.Batch[string]("batch", 2, 0))
	flow.Sink(batches, "train", func(_ context.Context, b []string) error {
		fmt.Println(b)
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Println("budget in use:", g.Budget().InUse())
	// Output:
	// [A.JPG B.JPG]
	// [C.JPG D.JPG]
	// [E.JPG]
	// budget in use: 0
}

// A failing stage cancels the graph; the error names it.
func ExampleGraph_Run() {
	g := flow.New("example")
	nums := flow.FromSlice(g, "numbers", []int{1, 2, 0, 4})
	inv := flow.Via(nums, stage.Map("invert", func(_ context.Context, v int) (float64, error) {
		if v == 0 {
			return 0, fmt.Errorf("cannot invert 0")
		}
		return 1 / float64(v), nil
	}))
	flow.Sink(inv, "print", func(_ context.Context, v float64) error { return nil })
	fmt.Println(g.Run(context.Background()))
	// Output: stage "invert": cannot invert 0
}

func ExampleBroadcast() {
	g := flow.New("example")
	outs := flow.Broadcast(flow.FromSlice(g, "src", []int{1, 2}), "copy", 2)
	var a, b []int
	flow.Collect(outs[0], "a", &a)
	flow.Collect(outs[1], "b", &b)
	_ = g.Run(context.Background())
	fmt.Println(a, b)
	// Output: [1 2] [1 2]
}

func ExampleBudget() {
	b := flow.NewBudget(100)
	_ = b.Acquire(context.Background(), 60)
	fmt.Println(b.TryAcquire(50), b.InUse())
	b.Release(60)
	fmt.Println(b.TryAcquire(50), b.InUse())
	// Output:
	// false 60
	// true 50
}

// A budget resized while in use: shrinking revokes nothing, new requests wait.
func ExampleBudget_SetLimit() {
	b := flow.NewBudget(64)
	_ = b.Acquire(context.Background(), 40)
	_ = b.SetLimit(32)
	fmt.Println(b.TryAcquire(1), b.InUse(), b.Limit())
	b.Release(40)
	fmt.Println(b.TryAcquire(16), b.InUse())
	// Output:
	// false 40 32
	// true 16
}

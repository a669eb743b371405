package flow_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/psiflow/psiflow/flow"
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
	decoded := flow.OrderedMap(files, "decode", 4, func(_ context.Context, name string) (string, error) {
		return strings.ToUpper(name), nil
	})
	batches := flow.Batch(decoded, "batch", 2, 0)
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
	inv := flow.Map(nums, "invert", 1, func(_ context.Context, v int) (float64, error) {
		if v == 0 {
			return 0, fmt.Errorf("cannot invert 0")
		}
		return 1 / float64(v), nil
	})
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
	b, err := flow.NewBudget(100)
	if err != nil {
		fmt.Println(err)
		return
	}
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
	b, _ := flow.NewBudget(64)
	_ = b.Acquire(context.Background(), 40)
	_ = b.SetLimit(32)
	fmt.Println(b.TryAcquire(1), b.InUse(), b.Limit())
	b.Release(40)
	fmt.Println(b.TryAcquire(16), b.InUse())
	// Output:
	// false 40 32
	// true 16
}

// Map runs a function on several workers; results leave as they complete.
func ExampleMap() {
	g := flow.New("example")
	squares := flow.Map(flow.FromSlice(g, "numbers", []int{1, 2, 3, 4}), "square", 2, func(_ context.Context, v int) (int, error) {
		return v * v, nil
	})
	var got []int
	flow.Collect(squares, "collect", &got)
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	slices.Sort(got) // completion order
	fmt.Println(got)
	// Output: [1 4 9 16]
}

// OrderedMap keeps the input order whatever the workers' speed.
func ExampleOrderedMap() {
	g := flow.New("example")
	words := flow.OrderedMap(flow.FromSlice(g, "numbers", []int{3, 1, 2}), "spell", 3, func(_ context.Context, v int) (string, error) {
		return strings.Repeat("*", v), nil
	})
	flow.Sink(words, "print", func(_ context.Context, w string) error {
		fmt.Println(w)
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// ***
	// *
	// **
}

func ExampleFilter() {
	g := flow.New("example")
	even := flow.Filter(flow.FromSlice(g, "numbers", []int{1, 2, 3, 4}), "even", func(_ context.Context, v int) (bool, error) {
		return v%2 == 0, nil
	})
	var got []int
	flow.Collect(even, "collect", &got)
	_ = g.Run(context.Background())
	fmt.Println(got)
	// Output: [2 4]
}

func ExampleBatch() {
	g := flow.New("example")
	batches := flow.Batch(flow.FromSlice(g, "numbers", []int{1, 2, 3, 4, 5}), "batch", 2, 0)
	var got [][]int
	flow.Collect(batches, "collect", &got)
	_ = g.Run(context.Background())
	fmt.Println(got)
	// Output: [[1 2] [3 4] [5]]
}

func ExampleTap() {
	g := flow.New("example")
	seen := 0
	counted := flow.Tap(flow.FromSlice(g, "numbers", []int{1, 2, 3}), "count", func(int) { seen++ })
	flow.Sink(counted, "drop", func(context.Context, int) error { return nil })
	_ = g.Run(context.Background())
	fmt.Println(seen)
	// Output: 3
}

func ExampleFlatMap() {
	g := flow.New("example")
	words := flow.FlatMap(flow.FromSlice(g, "lines", []string{"a b", "c"}), "split", func(_ context.Context, line string, emit func(string) error) error {
		for _, w := range strings.Fields(line) {
			if err := emit(w); err != nil {
				return err
			}
		}
		return nil
	})
	var got []string
	flow.Collect(words, "collect", &got)
	_ = g.Run(context.Background())
	fmt.Println(got)
	// Output: [a b c]
}

// A mistake in a stage's arguments is reported by Run, naming the stage,
// before anything starts.
func ExampleGraph_Run_badArguments() {
	g := flow.New("example")
	b := flow.Batch(flow.FromSlice(g, "numbers", []int{1, 2, 3}), "batch", 0, 0)
	flow.Sink(b, "drop", func(context.Context, []int) error { return nil })
	fmt.Println(g.Run(context.Background()))
	// Output: graph "example": stage "batch": batch size 0: must be at least 1
}

// closer is what a graph may own: here it says when it is closed.
type closer string

func (c closer) Close() error { fmt.Println("closed", string(c)); return nil }

// A graph owns what was made for it alone: Run closes it once every stage
// has ended, also when the graph cannot start.
func ExampleCloses() {
	g := flow.New("example", flow.Closes(closer("the runtime")))
	flow.Sink(flow.FromSlice(g, "numbers", []int{1, 2}), "print", func(_ context.Context, v int) error {
		fmt.Println(v)
		return nil
	})
	fmt.Println(g.Run(context.Background()))

	g = flow.New("broken", flow.Closes(closer("the other one")))
	flow.FromSlice(g, "numbers", []int{1}) // never consumed
	fmt.Println(g.Run(context.Background()))
	// Output:
	// 1
	// 2
	// closed the runtime
	// <nil>
	// closed the other one
	// graph "broken": the output of "numbers" is not consumed; end it with Sink
}

// A step written outside package flow takes the stream before it and reads
// its graph (here the budget) from it.
func ExampleStream_Graph() {
	g := flow.New("example", flow.WithBudget(1<<20))
	nums := flow.FromSlice(g, "numbers", []int{1, 2, 3})
	fmt.Println(nums.Graph().Name(), nums.Graph().Budget().Limit())
	flow.Sink(nums, "drop", func(context.Context, int) error { return nil })
	fmt.Println(g.Run(context.Background()))
	// Output:
	// example 1048576
	// <nil>
}

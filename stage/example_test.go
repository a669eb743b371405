package stage_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
)

func ExampleApply() {
	g := flow.New("example")
	sq := flow.Via(flow.FromSlice(g, "src", []int{1, 2, 3}), stage.Apply("square", 1, true, func(_ context.Context, v int) (int, error) {
		return v * v, nil
	}))
	var got []int
	flow.Collect(sq, "sink", &got)
	_ = g.Run(context.Background())
	fmt.Println(got)
	// Output: [1 4 9]
}

func ExampleFilter() {
	g := flow.New("example")
	even := flow.Via(flow.FromSlice(g, "src", []int{1, 2, 3, 4}), stage.Filter("even", func(_ context.Context, v int) (bool, error) {
		return v%2 == 0, nil
	}))
	var got []int
	flow.Collect(even, "sink", &got)
	_ = g.Run(context.Background())
	fmt.Println(got)
	// Output: [2 4]
}

func ExampleFlatMap() {
	g := flow.New("example")
	rep := flow.Via(flow.FromSlice(g, "src", []int{1, 2}), stage.FlatMap("repeat", func(_ context.Context, v int, emit func(int) error) error {
		for range v {
			if err := emit(v); err != nil {
				return err
			}
		}
		return nil
	}))
	var got []int
	flow.Collect(rep, "sink", &got)
	_ = g.Run(context.Background())
	fmt.Println(got)
	// Output: [1 2 2]
}

func ExampleBatch() {
	g := flow.New("example")
	b := flow.Via(flow.FromSlice(g, "src", []int{1, 2, 3, 4, 5}), stage.Batch[int]("batch", 2, 0))
	var got [][]int
	flow.Collect(b, "sink", &got)
	_ = g.Run(context.Background())
	fmt.Println(got)
	// Output: [[1 2] [3 4] [5]]
}

func ExampleApply_ordered() {
	g := flow.New("example")
	out := flow.Via(flow.FromSlice(g, "src", []int{1, 2, 3, 4}), stage.Apply("double", 3, true, func(_ context.Context, v int) (int, error) {
		return 2 * v, nil
	}))
	var got []int
	flow.Collect(out, "sink", &got)
	_ = g.Run(context.Background())
	fmt.Println(got)
	// Output: [2 4 6 8]
}

func ExampleTap() {
	g := flow.New("example")
	sum := 0
	out := flow.Via(flow.FromSlice(g, "src", []int{1, 2, 3}), stage.Tap("sum", func(v int) { sum += v }))
	flow.Sink(out, "sink", func(context.Context, int) error { return nil })
	_ = g.Run(context.Background())
	fmt.Println(sum)
	// Output: 6
}

// Skip bad elements instead of failing: each is logged and counted, the
// others go on in order.
func ExampleSkipper() {
	sk, err := stage.NewSkipper(stage.SkipPolicy{OnError: stage.Skip, MaxSkips: 10,
		Log: func(key string, err error) { fmt.Println("skipped", key, "-", err) }})
	if err != nil {
		fmt.Println(err)
		return
	}
	g := flow.New("example")
	parsed := flow.OrderedMap(flow.FromSlice(g, "src", []string{"1", "x", "3"}), "parse", 2, func(_ context.Context, s string) (int, error) {
		sk.Seen()
		var v int
		if _, err := fmt.Sscan(s, &v); err != nil {
			return 0, sk.Handle(s, errors.New("not a number"))
		}
		return v, nil
	})
	var got []int
	flow.Collect(parsed, "sink", &got)
	err = g.Run(context.Background())
	fmt.Println(got, err, sk.Skipped())
	// Output:
	// skipped x - not a number
	// [1 3] <nil> 1
}

// buffer is a pooled resource: the graph releases it, never user code.
type buffer struct{ data []byte }

func (b *buffer) Release() { fmt.Printf("released %q\n", b.data) }

// A map whose output points into its input calls Keep: the input is then
// released with the output, after the sink, instead of when the map returns.
func ExampleKeep() {
	g := flow.New("example")
	bufs := flow.FromSlice(g, "read", []*buffer{{[]byte("ab")}})
	heads := flow.Map(bufs, "head", 1, func(ctx context.Context, b *buffer) ([]byte, error) {
		stage.Keep(ctx) // the result is a view into b
		return b.data[:1], nil
	})
	flow.Sink(heads, "print", func(_ context.Context, h []byte) error {
		fmt.Printf("consumed %q\n", h)
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// consumed "a"
	// released "ab"
}

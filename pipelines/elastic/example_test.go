package elastic_test

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/pipelines/elastic"
	"github.com/psiflow/psiflow/stage"
)

// Narrow bounds how many elements a stage of several workers holds at once; the
// runtime lowers the limit under memory pressure and restores it after.
func ExampleNarrow() {
	w, err := elastic.NewWorkers(4)
	if err != nil {
		panic(err)
	}
	w.SetLimit(1) // as under LevelFull
	g := flow.New("narrowed")
	held := flow.Via(flow.FromSlice(g, "numbers", []int{1, 2, 3}), elastic.Narrow[int]("narrow", w))
	squares := flow.Via(held, stage.OrderedParMap("square", 4, func(_ context.Context, h *elastic.Held[int]) (int, error) {
		defer h.Release() // gives the slot back
		return h.V * h.V, nil
	}))
	flow.Sink(squares, "print", func(_ context.Context, v int) error {
		fmt.Println(v)
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("slots held:", w.InUse())
	// Output:
	// 1
	// 4
	// 9
	// slots held: 0
}

// A runtime in fixed mode: the budget given, no headroom, no shedding.
func ExampleNew() {
	rt, err := elastic.New(elastic.Config{Mode: elastic.Fixed, MaxBudget: 16 << 20, Workers: 2, ReadRegistered: -1})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	g := flow.New("train", rt.Options()...)
	flow.Sink(flow.FromSlice(g, "items", []string{"a", "b"}), "consume", func(context.Context, string) error { return nil })
	if err := rt.Run(context.Background(), g); err != nil {
		panic(err)
	}
	fmt.Println(rt.Mode(), rt.Budget().Limit()>>20, "MiB")
	// Output: fixed 16 MiB
}

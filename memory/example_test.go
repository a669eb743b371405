package memory_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/pressure"
)

// Narrow bounds how many elements a stage of several workers holds at once; the
// runtime lowers the limit under memory pressure and restores it after.
func ExampleNarrow() {
	w, err := memory.NewWorkers(4)
	if err != nil {
		panic(err)
	}
	w.SetLimit(1) // as under LevelFull
	g := flow.New("narrowed")
	held := flow.Via(flow.FromSlice(g, "numbers", []int{1, 2, 3}), memory.Narrow[int]("narrow", w))
	// The graph releases each Held, giving its slot back, once square returns.
	squares := flow.OrderedMap(held, "square", 4, func(_ context.Context, h *memory.Held[int]) (int, error) {
		return h.V * h.V, nil
	})
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
	rt, err := memory.New(memory.Config{Mode: memory.Fixed, MaxBudget: 16 << 20, Workers: 2, ReadRegistered: -1})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	g := flow.New("train", flow.WithRuntime(rt))
	flow.Sink(flow.FromSlice(g, "items", []string{"a", "b"}), "consume", func(context.Context, string) error { return nil })
	if err := g.Run(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println(rt.Mode(), rt.Budget().Limit()>>20, "MiB")
	// Output: fixed 16 MiB
}

// One graph under a runtime of its own: the graph owns it, and Run closes it.
func ExampleNewGraph() {
	g, err := memory.NewGraph("train", memory.Config{Mode: memory.Fixed, MaxBudget: 16 << 20, ReadRegistered: -1})
	if err != nil {
		panic(err)
	}
	flow.Sink(flow.FromSlice(g, "items", []string{"a", "b"}), "consume", func(context.Context, string) error { return nil })
	fmt.Println(g.Budget().Limit()>>20, "MiB;", g.Run(context.Background()))
	// A second graph on the same runtime is refused: it was closed with the first.
	g2 := flow.New("again", flow.WithRuntime(g.Runtime()))
	flow.Sink(flow.FromSlice(g2, "items", []string{"c"}), "consume", func(context.Context, string) error { return nil })
	fmt.Println(g2.Run(context.Background()))
	// Output:
	// 16 MiB; <nil>
	// memory runtime: graph again: the runtime is closed
}

// A run that the cgroup leaves less than its floor ends with a BelowFloorError; a
// launcher tells it from a failure with errors.Is and exits with its own status.
func ExampleBelowFloorError() {
	policy, err := memory.ParseFloorPolicy("stop")
	if err != nil {
		panic(err)
	}
	var runErr error = &memory.BelowFloorError{Floor: 40 << 20, Report: pressure.HeadroomReport{
		MemorySample: pressure.MemorySample{Limit: 256 << 20, Limited: true, Source: "memory.max", Unreclaimable: 230 << 20, Self: 20 << 20},
		Current:      30 << 20, Reserve: 16 << 20,
	}}
	fmt.Println(policy, errors.Is(runErr, memory.ErrBelowFloor))
	fmt.Println(runErr)
	// Output:
	// stop true
	// stopped: the cgroup (memory.max) leaves the loader 30 MiB (limit 256 MiB − others 210 MiB − reserve 16 MiB), below its floor of 40 MiB; stopping rather than risk the co-tenant's OOM kill (-below-floor pause waits for memory, run runs on at the floor)
}

package memory_test

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/memory"
)

// A graph whose source is gated by the kernel's memory-pressure signal of this
// process's cgroup: the graph takes the runtime once; the first Run opens the
// gate's monitor, which runs until the runtime is closed.
func ExampleRuntime_pressure() {
	rt, err := memory.New(memory.Config{Mode: memory.Elastic, Floor: 8 << 20, BudgetFloor: 4 << 20, MaxBudget: 16 << 20,
		Workers: 1, ReadRegistered: -1, Pressure: true, BelowFloor: memory.RunAtFloor})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	rt.OnShed(memory.ActionUMAIdle, func(ctx context.Context) (int64, error) {
		// At Critical: free what can be freed (evict preemptible buffers, drop page cache).
		return 0, nil
	})
	g := flow.New("loader", flow.WithRuntime(rt))
	var total int
	flow.Sink(flow.FromSlice(g, "numbers", []int{1, 2, 3}), "sum", func(ctx context.Context, v int) error {
		total += v
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(total)
	// Output: 6
}

package throttle_test

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/flow/throttle"
)

// A graph whose source is gated by the kernel's memory-pressure signal of this
// process's cgroup.
func Example() {
	th, err := throttle.New(throttle.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	th.OnShed("drop-cache", func(ctx context.Context) error {
		// Free what can be freed: evict preemptible buffers, drop page cache, shrink pools.
		return nil
	})
	g := flow.New("loader", th.Option())
	var total int
	flow.Sink(flow.FromSlice(g, "numbers", []int{1, 2, 3}), "sum", func(ctx context.Context, v int) error {
		total += v
		return nil
	})
	if err := th.Run(context.Background(), g); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(total)
	// Output: 6
}

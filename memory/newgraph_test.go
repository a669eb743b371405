package memory

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/flow"
)

// TestNewGraphOwnsItsRuntime: the graph runs under the runtime made from the
// config (zero workers: GOMAXPROCS) and its Run closes it, also when the graph
// fails before it starts; a config that cannot work is an error naming the graph.
func TestNewGraphOwnsItsRuntime(t *testing.T) {
	for _, broken := range []bool{false, true} {
		g, err := NewGraph("train", Config{Mode: Fixed, MaxBudget: 8 << 20, ReadRegistered: -1})
		if err != nil {
			t.Fatal(err)
		}
		rt, ok := g.Runtime().(*Runtime)
		if !ok || g.Budget() != rt.Budget() || g.Budget().Limit() != 8<<20 {
			t.Fatalf("the graph's runtime %T, budget %v: not the one made for it", g.Runtime(), g.Budget())
		}
		if got, want := rt.Workers().Max(), runtime.GOMAXPROCS(0)+WorkerSlack; got != want {
			t.Errorf("workers 0: limiter of %d, want GOMAXPROCS + slack = %d", got, want)
		}
		items := flow.FromSlice(g, "items", []int{1, 2, 3})
		if !broken {
			flow.Sink(items, "sink", func(context.Context, int) error { return nil })
		}
		err = g.Run(context.Background())
		if broken != (err != nil) {
			t.Fatalf("broken %v: Run = %v", broken, err)
		}
		rt.applyMu.Lock()
		closed := rt.closed
		rt.applyMu.Unlock()
		if !closed {
			t.Errorf("broken %v: the runtime is open after Run", broken)
		}
	}
	_, err := NewGraph("train", Config{Mode: Fixed, Workers: -2})
	if err == nil || !strings.Contains(err.Error(), `graph "train": memory: workers -2`) {
		t.Fatalf("workers -2: NewGraph = %v", err)
	}
}

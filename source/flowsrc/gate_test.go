package flowsrc

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/synth"
)

// oneGate is a gate of one permit that counts its grants.
type oneGate struct {
	sem      chan struct{}
	acquires atomic.Int64
}

func (g *oneGate) Acquire(ctx context.Context) error {
	select {
	case g.sem <- struct{}{}:
		g.acquires.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *oneGate) Release() { <-g.sem }

// The reads pass through the graph's gate (one permit per read), a sample read is
// emitted without a second permit (at Full what was read flows on and gives its
// memory back), and a gate of a single permit does not deadlock the source.
func TestFilesReadsPassThroughGraphGate(t *testing.T) {
	dir := t.TempDir()
	const n = 30
	paths, err := synth.JPEGFiles(dir, n, synth.Image{Width: 32, Height: 24}, 5)
	if err != nil {
		t.Fatal(err)
	}
	gate := &oneGate{sem: make(chan struct{}, 1)}
	g := flow.New("gated", flow.WithBudget(1<<20), flow.WithGate(gate))
	src := Files(g, "read", source.NewFiles(paths), source.Options{WorldSize: 1, Workers: 2})
	var mu sync.Mutex
	got := 0
	flow.Sink(src, "count", func(context.Context, *source.Sample) error {
		mu.Lock()
		got++
		mu.Unlock()
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := g.Run(ctx); err != nil {
		t.Fatalf("run with a one-permit gate: %v", err)
	}
	if got != n {
		t.Fatalf("delivered %d samples, want %d", got, n)
	}
	if a := gate.acquires.Load(); a != n {
		t.Fatalf("gate granted %d permits for %d files, want %d (one per read)", a, n, n)
	}
}

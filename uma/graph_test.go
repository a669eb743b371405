package uma

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
)

// TestGraphLeavesNoLeases runs a real flow graph over UMA byte leases charged
// to the graph's own byte budget: a source leases chunk ranges, a parallel
// stage copies them into pool buffers (releasing the input lease), a filter
// drops some, a batch groups them and a sink consumes them. Whether the
// graph ends, fails in a stage, or is cancelled, the ledger ends with no
// lease and the budget and pool at zero.
func TestGraphLeavesNoLeases(t *testing.T) {
	tests := []struct {
		name    string
		failAt  int // the copy stage fails on this element (-1: never)
		cancelN int // the sink cancels after this many batches (-1: never)
		want    error
	}{
		{"ends", -1, -1, nil},
		{"fails", 23, -1, errInjected},
		{"cancelled", -1, 3, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newTestUMA(t, testConfig())
			var src atomicRehydrate
			a, err := u.NewArena("graph", 16*u.ChunkSize(), ArenaOptions{Rehydrate: src.fn})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			pool, err := u.NewPool("graph-pool", 8*u.ChunkSize(), ArenaOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			cs := u.ChunkSize()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			g := flow.New("uma", flow.WithBudget(6*cs))
			leases := flow.Source(g, "lease", func(ctx context.Context, out *flow.Emitter[*ByteLease]) error {
				for k := range 64 {
					// The lease itself takes its bytes from the graph's budget,
					// so the element is emitted without a flow reservation.
					l, err := a.Lease(ctx, int64(k%16)*cs, cs/2, g.Budget())
					if err != nil {
						return err
					}
					if err := out.Emit(ctx, l); err != nil {
						return err
					}
				}
				return nil
			})
			var n atomic.Int64
			copied := flow.OrderedMap(leases, "copy", 2, func(ctx context.Context, in *ByteLease) (*ByteLease, error) {
				// The graph releases the input lease when this returns.
				if n.Add(1) == int64(tt.failAt)+1 {
					return nil, errInjected
				}
				// The output is bounded by the pool, not by the graph's budget:
				// a stage that waits for budget while holding its input's bytes
				// deadlocks once the source has filled the budget.
				out, err := pool.Alloc(ctx, in.Len(), nil)
				if err != nil {
					return nil, err
				}
				copy(out.Bytes(), in.Bytes())
				return out, nil
			})
			kept := flow.Via(copied, stage.Filter("drop-some", func(_ context.Context, l *ByteLease) (bool, error) {
				return l.Bytes()[0]%3 != 0, nil
			}))
			batches := flow.Via(kept, stage.Batch[*ByteLease]("batch", 4, 0))
			nb := 0
			flow.Sink(batches, "consume", func(_ context.Context, b []*ByteLease) error {
				// The graph releases the batch's leases when this returns.
				if nb++; nb == tt.cancelN {
					cancel()
				}
				return nil
			})
			err = g.Run(ctx)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Run returned %v, want %v", err, tt.want)
			}
			if err := u.CheckNoLeases(); err != nil {
				t.Fatalf("after the graph: %v", err)
			}
			if g.Budget().InUse() != 0 || pool.InUse() != 0 {
				t.Fatalf("budget %d and pool %d bytes still in use", g.Budget().InUse(), pool.InUse())
			}
			if g.Budget().MaxInUse() == 0 || g.Budget().MaxInUse() > g.Budget().Limit() {
				t.Fatalf("budget peak %d of %d", g.Budget().MaxInUse(), g.Budget().Limit())
			}
		})
	}
}

var errInjected = fmt.Errorf("injected failure")

//go:build linux

package flow_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/uma"
)

// TestUMALeasesComeBack runs UMA byte leases through a real graph written
// with the stream-first API, where no user function releases anything: a
// source allocates leases charged to the graph's budget, a parallel map
// copies each into a new lease (the graph releases the input), a map keeps
// its input in a view (stage.Keep), a filter drops some, a batch groups them
// and a map over each batch sums them (the graph releases the members). On
// success, on an error in a stage and on cancellation, the ledger ends with
// no lease and the budget and pool at zero.
func TestUMALeasesComeBack(t *testing.T) {
	errInjected := errors.New("injected")
	for _, tc := range []struct {
		name    string
		failAt  int64 // the copy fails on this element (0: never)
		cancelN int   // the sink cancels after this many sums (0: never)
		want    error
	}{
		{"ends", 0, 0, nil},
		{"fails", 23, 0, errInjected},
		{"cancelled", 0, 3, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := uma.New(uma.Config{ChunkSize: 64 << 10, StableBytes: 1 << 20, MemoryLimit: func() (int64, string, error) { return 1 << 30, "test", nil }})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := u.Close(); err != nil {
					t.Error(err)
				}
			}()
			pool, err := u.NewPool("graph", 1<<20, uma.ArenaOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			const size = 4 << 10
			g := flow.New("uma", flow.WithBudget(16*size))
			leases := flow.Source(g, "lease", func(ctx context.Context, out *flow.Emitter[*uma.ByteLease]) error {
				for k := range 200 {
					// The lease takes its bytes from the graph's budget itself.
					l, err := pool.Alloc(ctx, size, g.Budget())
					if err != nil {
						return err
					}
					l.Bytes()[0] = byte(k)
					if err := out.Emit(ctx, l); err != nil {
						return err
					}
				}
				return nil
			})
			var n atomic.Int64
			copied := flow.OrderedMap(leases, "copy", 3, func(ctx context.Context, in *uma.ByteLease) (*uma.ByteLease, error) {
				if n.Add(1) == tc.failAt {
					return nil, errInjected
				}
				// Bounded by the pool, not the budget: waiting for budget while
				// holding the input's bytes could wait for ever.
				out, err := pool.Alloc(ctx, in.Len(), nil)
				if err != nil {
					return nil, err
				}
				copy(out.Bytes(), in.Bytes())
				return out, nil
			})
			type view struct{ head []byte }
			views := flow.Map(copied, "view", 2, func(ctx context.Context, in *uma.ByteLease) (view, error) {
				stage.Keep(ctx) // the view points into the lease
				return view{in.Bytes()[:16]}, nil
			})
			kept := flow.Filter(views, "drop-some", func(_ context.Context, v view) (bool, error) { return v.head[0]%3 != 0, nil })
			sums := flow.Map(flow.Batch(kept, "batch", 4, 0), "sum", 1, func(_ context.Context, vs []view) (int, error) {
				s := 0
				for _, v := range vs {
					s += int(v.head[0])
				}
				return s, nil
			})
			nb := 0
			flow.Sink(sums, "consume", func(context.Context, int) error {
				if nb++; nb == tc.cancelN {
					cancel()
				}
				return nil
			})
			err = runWithin(t, g, ctx, "over UMA leases")
			if !errors.Is(err, tc.want) {
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
			if err := u.CheckNoLeases(); err != nil {
				t.Fatalf("after the graph: %v", err)
			}
			if g.Budget().InUse() != 0 || pool.InUse() != 0 {
				t.Fatalf("budget %d and pool %d bytes still in use", g.Budget().InUse(), pool.InUse())
			}
			if tc.want == nil && nb != (200*2/3+3)/4 {
				t.Fatalf("%d sums", nb)
			}
		})
	}
}

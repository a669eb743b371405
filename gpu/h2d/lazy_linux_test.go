//go:build linux

package h2d

import (
	"context"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/tensor"
)

// TestLazyRing: the ring is made by the first batch (slots of batch × its
// sample size), serves every epoch's graph, and refuses larger samples by
// name; a Lazy never used makes nothing.
func TestLazyRing(t *testing.T) {
	for _, dv := range devices(t) {
		t.Run(dv.name, func(t *testing.T) {
			d := dv.open(t)
			u := newUMA(t)
			const n, batch = 70, 16
			var made []*Ring
			l, err := NewLazy(Config{UMA: u, Device: d, Budget: 1 << 20}, batch, func(r *Ring) { made = append(made, r) })
			if err != nil {
				t.Fatal(err)
			}
			if l.Made() != nil {
				t.Fatal("a ring before the first batch")
			}
			for epoch := range 2 {
				var pool tensor.SamplePool
				g := flow.New("lazy", flow.WithBudget(1<<20))
				ready := flow.Via(flow.Via(flow.Via(flow.Batch(samples(g, n, &pool), "batch", batch, 0), l.Pin("pin")), l.H2D("h2d")), MarkPreemptible("mark"))
				seen := 0
				flow.Sink(ready, "train", func(ctx context.Context, b *DeviceBatch) error {
					got, err := b.Float32s(ctx)
					if err != nil {
						return err
					}
					if got[0] != value(seen, 0) {
						t.Errorf("epoch %d: batch at %d starts with %v", epoch, seen, got[0])
					}
					seen += b.Len()
					return nil
				})
				if err := g.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				if seen != n {
					t.Fatalf("epoch %d: %d samples, want %d", epoch, seen, n)
				}
			}
			if len(made) != 1 || l.Made() != made[0] {
				t.Fatalf("%d rings made over two epochs, want 1", len(made))
			}
			if got, want := made[0].SlotBytes(), int64(batch*3*8*8*4); got != want {
				t.Errorf("slot of %d bytes, want a batch of %d samples: %d", got, batch, want)
			}
			// A batch of larger samples than the first does not fit.
			big := &tensor.Sample{Key: "big.jpg"}
			big.Tensor.ReuseU8(batch * 3 * 8 * 8 * 4 * 2)
			big.Tensor.SetShape(len(big.Tensor.Bytes()))
			g := flow.New("big")
			flow.Sink(flow.Via(flow.FromSlice(g, "src", [][]*tensor.Sample{{big}}), l.Pin("pin")), "sink", func(context.Context, *Staged) error { return nil })
			if err := g.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "more than a staging slot") ||
				!strings.Contains(err.Error(), "samples of the first batch's size: every sample must have one size") {
				t.Fatalf("a larger batch: %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Ring(64); err == nil {
				t.Fatal("a closed Lazy made a ring")
			}
		})
	}
	u := newUMA(t)
	l, err := NewLazy(Config{UMA: u, Device: devices(t)[0].open(t), Budget: 1 << 20}, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close of an unused Lazy: %v", err)
	}
	if _, err := NewLazy(Config{UMA: u}, 8, nil); err == nil {
		t.Fatal("NewLazy without a device")
	}
}

package sink

import (
	"context"
	"fmt"
	"testing"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/tensor"
)

// TestTorchCollatesIntoSlots: batches collated by tensor.CollateInto with
// the sink as destination are written straight into the shared slots and
// announced without a copy (bytes written into the lent slot after the
// collation but before Consume are what Python reads, which a copy would
// have missed), every batch arrives once, and a slot lent to a batch that
// is dropped before Consume comes back, with its budget.
func TestTorchCollatesIntoSlots(t *testing.T) {
	tr := newTorch(t, 2)
	const batches, per, h, w = 6, 4, 5, 7
	sample := 3 * h * w
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		// a lent slot dropped before Consume: back to the free list
		_, release, err := tr.Lend(context.Background(), int64(per*sample))
		if err != nil {
			errc <- err
			return
		}
		release()
		if b := tr.Budget(); b.InUse() != 0 {
			errc <- fmt.Errorf("budget %d in use after a dropped lend", b.InUse())
			return
		}
		g := flow.New("lend")
		var ss []*tensor.Sample
		for i := range batches * per {
			s := &tensor.Sample{Key: fmt.Sprint("s", i), Label: int64(i % 3)}
			u := s.Tensor.ReuseU8(sample)
			for j := range u {
				u[j] = pattern(i, j)
			}
			s.Tensor.SetShape(3, h, w)
			ss = append(ss, s)
		}
		into := flow.Via(flow.Batch(flow.FromSlice(g, "samples", ss), "batch", per, 0),
			tensor.CollateInto("collate", func() tensor.Destination { return tr }))
		flow.Sink(into, "torch", func(ctx context.Context, b *tensor.Batch) error {
			b.Tensor.U8[0] = 0xEE // after collation: seen by Python only if nothing was copied
			return tr.Consume(ctx, b)
		})
		if err := g.Run(context.Background()); err != nil {
			errc <- err
			return
		}
		errc <- tr.Close(nil)
	}()
	g := dialTorch(t, tr.Socket())
	defer g.close()
	seen := 0
	for {
		m, err := g.next()
		if err != nil {
			t.Fatal(err)
		}
		if m.T == "end" {
			break
		}
		data := g.mem[m.Offset : m.Offset+m.NBytes]
		if data[0] != 0xEE {
			t.Fatalf("batch %d: the slot does not hold the collated batch itself (first byte %d)", seen, data[0])
		}
		for i := range per {
			idx := seen*per + i
			d := data[i*sample : (i+1)*sample]
			if i == 0 {
				d = d[1:]
				if err := checkSample(idx, append([]byte{pattern(idx, 0)}, d...)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := checkSample(idx, d); err != nil {
				t.Fatal(err)
			}
		}
		seen++
		_ = g.release(m.Slot)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if seen != batches {
		t.Fatalf("got %d batches, want %d", seen, batches)
	}
	if b := tr.Budget(); b.InUse() != 0 {
		t.Errorf("budget in use %d after the end", b.InUse())
	}
}

// TestTorchLateReleaseOfAnEarlierLend: the graph releases a batch after the
// sink consumed it, and by then Python may have released the slot and the
// slot may be lent to the next batch; that late release must leave the new
// lend's slot and budget alone (it gave the slot back to the free list, so
// two batches were collated into one slot at once).
func TestTorchLateReleaseOfAnEarlierLend(t *testing.T) {
	tr := newTorch(t, 1)
	g := dialTorch(t, tr.Socket())
	defer g.close()
	ctx := context.Background()
	const n = 3 * 2 * 2
	bufA, releaseA, err := tr.Lend(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	a := &tensor.Batch{Keys: []string{"a"}, Tensor: tensor.Tensor{DType: tensor.Uint8, Shape: []int{1, 3, 2, 2}, U8: bufA}}
	if err := tr.Consume(ctx, a); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := g.next()
		if err != nil {
			t.Fatal(err)
		}
		if m.T == "batch" {
			if err := g.release(m.Slot); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	_, releaseB, err := tr.Lend(ctx, n) // waits for Python's release of the one slot
	if err != nil {
		t.Fatal(err)
	}
	releaseA() // the graph releases batch a only now
	if free, inUse := len(tr.free), tr.Budget().InUse(); free != 0 || inUse != n {
		t.Fatalf("after a late release of the slot's earlier lend: %d slots free, budget %d in use; want 0 free, %d in use", free, inUse, n)
	}
	releaseB()
	if free, inUse := len(tr.free), tr.Budget().InUse(); free != 1 || inUse != 0 {
		t.Fatalf("after the dropped lend's release: %d slots free, budget %d in use; want 1, 0", free, inUse)
	}
}

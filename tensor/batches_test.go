package tensor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/tensor"
)

// sized makes n uint8 samples of shape [k], the one at bad (if ≥ 0) of shape [k+1].
func sized(n, k, bad int) []*tensor.Sample {
	out := make([]*tensor.Sample, n)
	for i := range out {
		s := &tensor.Sample{Key: fmt.Sprint("s", i), Label: int64(i)}
		l := k
		if i == bad {
			l = k + 1
		}
		u := s.Tensor.ReuseU8(l)
		for j := range u {
			u[j] = uint8(i)
		}
		s.Tensor.SetShape(l)
		out[i] = s
	}
	return out
}

// TestBatchesAsBatchThenCollate: Batches gives the batches that flow.Batch then
// Collate give, in order, for sizes that do and do not divide the input.
func TestBatchesAsBatchThenCollate(t *testing.T) {
	for _, n := range []int{0, 1, 5, 6, 64} {
		for _, size := range []int{1, 2, 3, 64} {
			run := func(joined bool) (keys [][]string, shapes [][]int) {
				g := flow.New("b", flow.WithBudget(1<<20))
				src := flow.FromSlice(g, "samples", sized(n, 4, -1))
				var bs flow.Stream[*tensor.Batch]
				if joined {
					bs = flow.Via(src, tensor.Batches("batch", size))
				} else {
					bs = flow.Via(flow.Batch(src, "batch", size, 0), tensor.Collate("collate"))
				}
				flow.Sink(bs, "sink", func(_ context.Context, b *tensor.Batch) error {
					keys = append(keys, slices.Clone(b.Keys))
					shapes = append(shapes, slices.Clone(b.Tensor.Shape))
					if got := b.Tensor.U8[len(b.Tensor.U8)-1]; int(got) != len(b.Keys)-1+int(b.Labels[0]) {
						return fmt.Errorf("last byte %d does not belong to the last sample of %v", got, b.Keys)
					}
					return nil
				})
				if err := g.Run(context.Background()); err != nil {
					t.Fatalf("n %d size %d joined %v: %v", n, size, joined, err)
				}
				if u := g.Budget().InUse(); u != 0 {
					t.Fatalf("n %d size %d: budget %d in use after Run", n, size, u)
				}
				return keys, shapes
			}
			k1, s1 := run(true)
			k2, s2 := run(false)
			if fmt.Sprint(k1, s1) != fmt.Sprint(k2, s2) {
				t.Errorf("n %d size %d: Batches gave %v %v, Batch+Collate %v %v", n, size, k1, s1, k2, s2)
			}
			if want := (n + size - 1) / size; len(k1) != want {
				t.Errorf("n %d size %d: %d batches, want %d", n, size, len(k1), want)
			}
		}
	}
}

// TestBatchesErrors: a size below one is reported by Run before anything
// starts; a collate error (samples of two shapes) names the stage and the
// sample, and the budget is back at zero.
func TestBatchesErrors(t *testing.T) {
	g := flow.New("zero")
	flow.Sink(flow.Via(flow.FromSlice(g, "samples", sized(2, 4, -1)), tensor.Batches("batch", 0)), "sink",
		func(context.Context, *tensor.Batch) error { return nil })
	if err := g.Run(context.Background()); err == nil || !strings.Contains(err.Error(), `stage "batch": batch size 0`) {
		t.Fatalf("size 0: Run = %v", err)
	}

	g = flow.New("mixed", flow.WithBudget(1<<20))
	flow.Sink(flow.Via(flow.FromSlice(g, "samples", sized(40, 4, 9)), tensor.Batches("batch", 4)), "sink",
		func(context.Context, *tensor.Batch) error { return nil })
	err := g.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), `stage "batch"`) || !strings.Contains(err.Error(), "s9") {
		t.Fatalf("two shapes: Run = %v, want the stage and sample s9 named", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Fatalf("two shapes: Run = %v, the cancellation instead of the cause", err)
	}
	if u := g.Budget().InUse(); u != 0 {
		t.Fatalf("budget %d in use after Run", u)
	}
}

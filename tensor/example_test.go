package tensor_test

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/tensor"
)

// Samples of one shape become batches [n, shape...]; the graph releases the
// samples once copied and each batch once the sink returns.
func ExampleCollate() {
	g := flow.New("collate")
	var samples []*tensor.Sample
	for i := range 3 {
		s := &tensor.Sample{Key: fmt.Sprintf("img%d", i), Label: int64(i % 2)}
		copy(s.Tensor.ReuseU8(4), []uint8{1, 2, 3, 4})
		s.Tensor.SetShape(1, 2, 2)
		samples = append(samples, s)
	}
	batches := flow.Via(flow.Batch(flow.FromSlice(g, "samples", samples), "batch", 2, 0), tensor.Collate("collate"))
	flow.Sink(batches, "print", func(_ context.Context, b *tensor.Batch) error {
		fmt.Println(b.Keys, b.Labels, b.Tensor.DType, b.Tensor.Shape, b.Size(), "bytes")
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// [img0 img1] [0 1] uint8 [2 1 2 2] 8 bytes
	// [img2] [0] uint8 [1 1 2 2] 4 bytes
}

// Batching and collating in one step: the same batches as flow.Batch then
// Collate.
func ExampleBatches() {
	g := flow.New("batches")
	var samples []*tensor.Sample
	for i := range 5 {
		s := &tensor.Sample{Key: fmt.Sprintf("img%d", i), Label: -1}
		copy(s.Tensor.ReuseU8(3), []uint8{uint8(i), 0, 0})
		s.Tensor.SetShape(3, 1, 1)
		samples = append(samples, s)
	}
	batches := flow.Via(flow.FromSlice(g, "samples", samples), tensor.Batches("batch", 2))
	flow.Sink(batches, "print", func(_ context.Context, b *tensor.Batch) error {
		fmt.Println(b.Keys, b.Tensor.Shape)
		return nil
	})
	fmt.Println(g.Run(context.Background()))
	// Output:
	// [img0 img1] [2 3 1 1]
	// [img2 img3] [2 3 1 1]
	// [img4] [1 3 1 1]
	// <nil>
}

// slots lends one fixed buffer at a time: a stand-in for a consumer's
// shared memory.
type slots struct{ mem []byte }

func (s *slots) Lend(_ context.Context, n int64) ([]byte, func(), error) {
	return s.mem[:n], func() { fmt.Println("slot back") }, nil
}

// Batches written straight into the consumer's memory: the sink sees its
// own buffer, and the graph gives it back when the batch is released.
func ExampleCollateInto() {
	g := flow.New("collate-into")
	dest := &slots{mem: make([]byte, 64)}
	var samples []*tensor.Sample
	for i := range 2 {
		s := &tensor.Sample{Key: fmt.Sprintf("img%d", i)}
		copy(s.Tensor.ReuseU8(4), []uint8{1, 2, 3, byte(4 + i)})
		s.Tensor.SetShape(4)
		samples = append(samples, s)
	}
	batches := flow.Via(flow.Batch(flow.FromSlice(g, "samples", samples), "batch", 2, 0),
		tensor.CollateInto("collate", func() tensor.Destination { return dest }))
	flow.Sink(batches, "print", func(_ context.Context, b *tensor.Batch) error {
		fmt.Println(b.Tensor.Shape, &b.Tensor.U8[0] == &dest.mem[0], dest.mem[:8])
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// [2 4] true [1 2 3 4 1 2 3 5]
	// slot back
}

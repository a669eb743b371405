//go:build linux

package h2d_test

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/gpu/h2d"
	"github.com/psiflow/psiflow/gpu/sim"
	"github.com/psiflow/psiflow/tensor"
	"github.com/psiflow/psiflow/uma"
)

// Samples batched, pinned into the staging ring, copied to a (simulated)
// device and handed on once the copy is complete.
func Example() {
	dev, _ := sim.Open(sim.Config{})
	defer dev.Close()
	u, _ := uma.New(uma.Config{})
	defer u.Close()
	ring, err := h2d.NewRing(h2d.Config{UMA: u, Device: dev, SlotBytes: 8 * 3 * 4 * 4, Budget: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	samples := make([]*tensor.Sample, 20)
	for i := range samples {
		s := &tensor.Sample{Key: fmt.Sprint(i), Label: int64(i % 2)}
		s.Tensor.ReuseU8(3 * 4 * 4)
		s.Tensor.SetShape(3, 4, 4)
		samples[i] = s
	}
	g := flow.New("to-device")
	batches := flow.Batch(flow.FromSlice(g, "samples", samples), "batch", 8, 0)
	onDevice := flow.Via(flow.Via(flow.Via(batches, h2d.Pin("pin", ring)), h2d.H2D("h2d", ring)), h2d.MarkPreemptible("mark-preemptible"))
	flow.Sink(onDevice, "train", func(ctx context.Context, b *h2d.DeviceBatch) error {
		fmt.Println(b.DType, b.Shape, "on", dev.Kind())
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	st := ring.Stats()
	fmt.Println("copies", st.Copies, "in use", st.InUse, "registered once per slot at most:", st.Registrations <= int64(ring.Slots()))
	fmt.Println(ring.Close())
	// Output:
	// uint8 [8 3 4 4] on sim
	// uint8 [8 3 4 4] on sim
	// uint8 [4 3 4 4] on sim
	// copies 3 in use 0 registered once per slot at most: true
	// <nil>
}

// Verify, before MarkPreemptible, reads every batch back from the device and
// compares it with its staging slot (the simulated device keeps its bytes
// unless Config.Discard).
func ExampleVerify() {
	dev, _ := sim.Open(sim.Config{})
	defer dev.Close()
	u, _ := uma.New(uma.Config{})
	defer u.Close()
	ring, err := h2d.NewRing(h2d.Config{UMA: u, Device: dev, SlotBytes: 4 * 16, Slots: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	samples := make([]*tensor.Sample, 8)
	for i := range samples {
		s := &tensor.Sample{Key: fmt.Sprint(i)}
		b := s.Tensor.ReuseU8(16)
		s.Tensor.SetShape(16)
		for j := range b {
			b[j] = byte(i*16 + j)
		}
		samples[i] = s
	}
	g := flow.New("verified")
	batches := flow.Batch(flow.FromSlice(g, "samples", samples), "batch", 4, 0)
	copied := flow.Via(flow.Via(batches, h2d.Pin("pin", ring)), h2d.H2D("h2d", ring))
	checked := flow.Via(flow.Via(copied, h2d.Verify("verify")), h2d.MarkPreemptible("mark-preemptible"))
	flow.Sink(checked, "train", func(ctx context.Context, b *h2d.DeviceBatch) error {
		fmt.Println("batch from", b.Keys[0], "equal on the device")
		return nil
	})
	fmt.Println(g.Run(context.Background()), ring.Close())
	// Output:
	// batch from 0 equal on the device
	// batch from 4 equal on the device
	// <nil> <nil>
}

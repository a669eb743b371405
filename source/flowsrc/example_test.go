package flowsrc_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/flowsrc"
	"github.com/psiflow/psiflow/stage/decode"
	"github.com/psiflow/psiflow/tensor"
)

// The README's image-folder loader: read through io_uring (pread where it is
// unavailable), decode with libjpeg-turbo, Resize(256) + CenterCrop(224),
// batch and collate, with the budget sized from the cgroup memory limit and
// the source gated on the cgroup's memory pressure. (Compiled, not run: it
// needs a folder of JPEGs.)
func Example_imageFolder() {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	files, err := source.Dir("/data/imagenet/train", ".JPEG")
	if err != nil {
		fmt.Println(err)
		return
	}
	// A graph under a memory runtime of its own (Run closes it): a quarter of the
	// cgroup memory limit in flight, the gate on its memory pressure, the read
	// pool the reads land in; its metrics and the graph's on reg.
	g, err := memory.NewGraph("train", memory.Config{Mode: memory.Fixed, Pressure: true, Registerer: reg}, flow.WithRegistry(reg))
	if err != nil {
		fmt.Println(err)
		return
	}
	samples := flowsrc.Files(g, "read", files, source.Options{Shuffle: true, Seed: 1})
	images := decode.Images(samples, "decode", decode.Transform{Resize: 256, CenterCrop: 224, Layout: tensor.CHW})
	batches := flow.Via(images, tensor.Batches("batch", 64))
	flow.Sink(batches, "train", func(ctx context.Context, b *tensor.Batch) error {
		_ = b.Tensor // hand the [64, 3, 224, 224] uint8 tensor to the training step
		return nil
	})
	if err := g.Run(ctx); err != nil {
		fmt.Println(err)
	}
}

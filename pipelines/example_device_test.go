//go:build linux

package pipelines_test

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/gpu/h2d"
	"github.com/psiflow/psiflow/pipelines"
)

// A pipeline that ends on the simulated device: the Go consumer gets every
// batch in device memory, its copy complete.
func ExampleHooks_deviceBatches() {
	file := []byte(`
source: {kind: generate, config: {items: 20, width: 32, height: 32}}
stages:
  - {kind: decode, config: {resize: 16, center_crop: 16}}
  - {kind: batch, config: {size: 8}}
  - pin
  - h2d
  - mark_preemptible
sink: discard
resources: {device: sim, budget: 16MiB, pressure: off}
`)
	p, err := pipelines.Parse("to-device.yaml", file, pipelines.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	sum, err := pipelines.Run(context.Background(), p, pipelines.Hooks{
		DeviceBatches: func(ctx context.Context, b *h2d.DeviceBatch) error {
			fmt.Println(b.DType, b.Shape, "on", b.Device().Kind())
			return nil
		}})
	fmt.Println(sum.Items, "samples on", p.Device(), err)
	// Output:
	// uint8 [8 3 16 16] on sim
	// uint8 [8 3 16 16] on sim
	// uint8 [4 3 16 16] on sim
	// 20 samples on sim <nil>
}

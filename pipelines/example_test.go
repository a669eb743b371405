package pipelines_test

import (
	"context"
	"fmt"

	"github.com/psiflow/psiflow/pipelines"
)

func Example() {
	file := []byte(`
source: {kind: generate, config: {items: 40, width: 32, height: 32}}
stages:
  - {kind: decode, config: {resize: 16, center_crop: 16}}
  - {kind: batch, config: {size: 8}}
  - collate
sink: discard
resources: {budget: 16MiB, pressure: off}
`)
	p, err := pipelines.Parse("example.yaml", file, pipelines.Options{Set: []string{"batch.size=10"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	sum, err := pipelines.Run(context.Background(), p, pipelines.Hooks{})
	fmt.Println(sum.Items, "samples in", sum.Batches, "batches", err)
	// Output: 40 samples in 4 batches <nil>
}

func ExampleParse_error() {
	_, err := pipelines.Parse("bad.yaml", []byte("source: generate\nstages: [decode, colate]\nsink: discard\n"), pipelines.Options{})
	fmt.Println(err)
	// Output:
	// bad.yaml:2:18: stage 2 (colate): unknown kind "colate" (did you mean "collate"?); stage kinds: "batch", "collate", "decode", "h2d", "mark_preemptible", "pin", "to_tensors"
	//   2 | stages: [decode, colate]
	//     |                  ^
}

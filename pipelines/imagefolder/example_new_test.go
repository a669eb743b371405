package imagefolder_test

import (
	"fmt"

	"github.com/psiflow/psiflow/pipelines/imagefolder"
)

// The preset with two overrides, as psiflow run -set takes them; a bad one is
// refused with the key, the rule and where it was written.
func ExampleNew() {
	p, err := imagefolder.New("/data/imagenet/train", "batch.size=32", "resources.memory_mode=fixed")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Source.Config.String("dir"), p.Stages[0].Config.Int("center_crop"), p.Stages[1].Config.Int("size"), p.Resource.MemoryMode, p.Resource.Pressure)
	_, err = imagefolder.New("/data/imagenet/train", "batch.size=0")
	fmt.Println(err)
	// Output:
	// /data/imagenet/train 224 32 fixed true
	// -set batch.size:1:12: stage 2 (batch) of kind batch: size: 0 is out of range (1 … 1048576)
	//   1 | batch.size=0
	//     |            ^
}

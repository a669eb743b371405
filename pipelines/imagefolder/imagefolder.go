package imagefolder

import (
	"fmt"
	"io/fs"
	"strconv"

	"github.com/psiflow/psiflow/pipelines"
)

// File is the shipped pipeline file the preset is (in [pipelines.Shipped]).
const File = "imagefolder.yaml"

// New is the shipped image pipeline over the ImageFolder root dir ("" keeps the
// file's default folder, out/demo-jpeg) with the overrides applied in order, each
// "key=value" as psiflow run -set takes it ("batch.size=32", "read.shuffle=true",
// "resources.memory_mode=fixed"; docs/PIPELINES.md lists every key). It is
// validated: a bad key, value or combination is an error naming it.
//
// The defaults are the launcher's: Resize 256, CenterCrop 224, batches of 64
// uint8 CHW tensors labelled by class folder, O_DIRECT reads, one epoch, the
// elastic memory runtime with the pressure gate, pausing below its floor, and a
// budget of a quarter of the cgroup's memory limit. The environment is not read:
// ${DATA} and ${EPOCHS} take the file's defaults. Run it with [pipelines.Run].
func New(dir string, overrides ...string) (*pipelines.Pipeline, error) {
	data, err := fs.ReadFile(pipelines.Shipped(), File)
	if err != nil {
		return nil, fmt.Errorf("imagefolder: %w", err)
	}
	var set []string
	if dir != "" {
		set = append(set, "read.dir="+strconv.Quote(dir)) // a YAML double-quoted scalar: the path as given
	}
	return pipelines.Parse("pipelines/"+File, data, pipelines.Options{
		Set: append(set, overrides...),
		Env: func(string) (string, bool) { return "", false },
	})
}

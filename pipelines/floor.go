package pipelines

import (
	"fmt"
	"os"
	"runtime"

	"github.com/psiflow/psiflow/source"
)

// Floor is a pipeline's smallest working set that still makes progress, the
// memory runtime's floor: each node's kind adds its part (Kind.Floor) before
// the runtime is made, so every pipeline, whichever front-end made it, gets
// the same estimate.
type Floor struct {
	// Budget is the part in the byte budget: the encoded samples of one batch
	// in flight from the source.
	Budget int64
	// Other is the part outside the budget: decode scratch, a batch of decoded
	// samples and its collated tensor.
	Other int64
	// Batch is the pipeline's batch size (its batch stage's size, 1 without
	// one): kinds size their part by it.
	Batch int
}

// Total is the whole floor.
func (f *Floor) Total() int64 { return f.Budget + f.Other }

// minBudgetFloor is the least a source contributes to the budget floor.
const minBudgetFloor = 1 << 20

// scratchPerWorker is what one decode worker holds besides its output: the
// decoded full-size image before resizing (1024×768 RGB is 2.25 MiB) and the
// resize buffers.
const scratchPerWorker = 4 << 20

// floorOf asks every node of p for its part of the floor.
func floorOf(p *Pipeline, r *runState) (Floor, error) {
	f := Floor{Batch: 1}
	for _, c := range p.Stages {
		if c.Kind.Name == "batch" {
			f.Batch = max(f.Batch, int(c.Config.Int("size")))
		}
	}
	for _, c := range p.Nodes() {
		if c.Kind.Floor == nil {
			continue
		}
		b := &Build{Name: c.Name, Epoch: p.StartEpoch, Pipeline: p, run: r}
		if err := c.Kind.Floor(b, c.Config, &f); err != nil {
			return Floor{}, fmt.Errorf("%s %q (kind %s, %s): floor: %w", c.Kind.Role, c.Name, c.Kind.Name, c.Pos, err)
		}
	}
	if f.Budget == 0 {
		f.Budget = minBudgetFloor
	}
	return f, nil
}

// filesFloor is a batch of the files' mean size, at least twice the largest
// file seen and 1 MiB (up to 256 files are stat'ed, spread over the list).
func filesFloor(files *source.Files, batch int) (int64, error) {
	var total, largest int64
	n := 0
	for i := 0; i < files.Len() && n < 256; i += max(1, files.Len()/256) {
		st, err := os.Stat(files.Path(i))
		if err != nil {
			return 0, err
		}
		total += st.Size()
		largest = max(largest, st.Size())
		n++
	}
	mean := int64(256 << 10)
	if n > 0 {
		mean = total / int64(n)
	}
	return max(int64(batch)*mean, 2*largest, minBudgetFloor), nil
}

// decodeFloor is one decode stage's part outside the budget: every worker's
// scratch, and two batches of its output (the batch being filled and the
// collated tensor).
func decodeFloor(cfg *Config, batch int) int64 {
	side := int64(512) // the output side when the stage does not fix it
	for _, k := range []string{"center_crop", "random_crop", "random_resized_crop", "resize"} {
		if n := cfg.Int(k); n > 0 {
			side = n
			break
		}
	}
	elem := int64(1)
	if cfg.String("normalize") != "none" {
		elem = 4
	}
	return 2*int64(batch)*3*side*side*elem + int64(workersOf(cfg))*scratchPerWorker
}

// workersOf is a stage's workers parameter, 0 meaning GOMAXPROCS.
func workersOf(cfg *Config) int {
	if w := int(cfg.Int("workers")); w > 0 {
		return w
	}
	return runtime.GOMAXPROCS(0)
}

package imagefolder

import (
	"fmt"
	"os"

	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/source"
)

// scratchPerWorker is what one decode worker holds besides its output: the decoded
// full-size image before resizing (1024×768 RGB is 2.25 MiB) and the resize buffers.
const scratchPerWorker = 4 << 20

// Floor is the image pipeline's smallest working set that still makes progress, and
// the part of it that is the byte budget.
type Floor struct {
	// Encoded is one batch of encoded files (the budget's floor): batch size × the
	// mean file size, at least twice the largest file seen.
	Encoded int64
	// Output is one batch of decoded samples plus its collated tensor.
	Output int64
	// Scratch is the decode scratch of every worker.
	Scratch int64
}

// Total is the whole floor.
func (f Floor) Total() int64 { return f.Encoded + f.Output + f.Scratch }

// FloorOf estimates cfg's floor over the files in paths (a sample of up to 256 is
// stat'ed).
func FloorOf(cfg Config, paths []string) (Floor, error) {
	var total, largest int64
	n := 0
	for i := 0; i < len(paths) && n < 256; i += max(1, len(paths)/256) {
		st, err := os.Stat(paths[i])
		if err != nil {
			return Floor{}, fmt.Errorf("imagefolder: floor: %w", err)
		}
		total += st.Size()
		largest = max(largest, st.Size())
		n++
	}
	mean := int64(256 << 10)
	if n > 0 {
		mean = total / int64(n)
	}
	f := Floor{
		Encoded: max(int64(cfg.BatchSize)*mean, 2*largest, 1<<20),
		Output:  2 * int64(cfg.BatchSize) * 3 * int64(cfg.Crop) * int64(cfg.Crop),
		Scratch: int64(cfg.Workers) * scratchPerWorker,
	}
	return f, nil
}

// newRuntime builds the memory runtime of cfg (cfg.Memory is set).
func newRuntime(cfg Config, files *source.Files, hooks Hooks) (*memory.Runtime, error) {
	ec := memory.Config{Mode: cfg.Memory, Pressure: cfg.Pressure, Workers: cfg.Workers, MaxBudget: cfg.Budget,
		ReadRegistered: cfg.ReadBuffers, Registerer: hooks.Registerer, Info: hooks.Info,
		BelowFloor: cfg.BelowFloor, Process: cfg.Process}
	if cfg.Memory == memory.Elastic {
		f, err := FloorOf(cfg, files.Paths())
		if err != nil {
			return nil, err
		}
		ec.BudgetFloor = min(f.Encoded, cfg.Budget)
		ec.Floor = ec.BudgetFloor + f.Output + f.Scratch
	}
	rt, err := memory.New(ec)
	if err != nil {
		return nil, fmt.Errorf("imagefolder: %w", err)
	}
	return rt, nil
}

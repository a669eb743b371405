package pipelines

import (
	"errors"
	"fmt"

	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/memory"
)

// newRuntime makes the memory runtime of p from its resources: the mode, the
// budget (auto: a quarter of the cgroup memory limit), the gate, the floor, the
// decode workers it narrows, and the registered read pool (the source's
// read_buffers).
func newRuntime(p *Pipeline, hooks Hooks, floor Floor) (*memory.Runtime, error) {
	info := func(format string, args ...any) {
		if hooks.Info != nil {
			hooks.Info(fmt.Sprintf(format, args...))
		}
	}
	res := p.Resource
	if res.Budget > 0 {
		if err := checkBatchesFit(p, hooks, res.Budget); err != nil {
			return nil, err
		}
	}
	mode := res.MemoryMode
	if mode == "" {
		mode = memory.Elastic
	}
	cfg := memory.Config{Mode: mode, Pressure: res.Pressure, MaxBudget: res.Budget, Workers: decodeWorkers(p),
		ReadRegistered: p.Source.Config.Int("read_buffers"), BelowFloor: res.BelowFloor, NoRoom: res.NoRoom, OnPause: hooks.OnPause,
		Registerer: hooks.Registerer, Info: hooks.Info, Process: hooks.Process}
	if mode == memory.Elastic {
		if cfg.BelowFloor == "" || cfg.BelowFloor == memory.PauseBelowFloor {
			cfg.PauseTimeout = res.PauseTimeout
		}
		if cfg.MaxBudget <= 0 {
			b, from, err := memory.DefaultByteBudget(0)
			if err != nil {
				return nil, fmt.Errorf("budget auto: %w", err)
			}
			cfg.MaxBudget = b
			info("budget: at most %s in flight, a quarter of the memory limit (%s)", bytesize.Human(b), from)
		}
		// The floor every kind of the pipeline contributed to; the budget floor
		// is its part in the budget, never above the largest budget.
		cfg.BudgetFloor = min(floor.Budget, cfg.MaxBudget)
		cfg.Floor = cfg.BudgetFloor + floor.Other
	} else if cfg.MaxBudget > 0 {
		info("budget: %s in flight", bytesize.Human(cfg.MaxBudget))
	}
	rt, err := memory.New(cfg)
	if err != nil {
		var le *memory.LimitBelowFloorError
		if errors.As(err, &le) && res.Budget <= 0 {
			// The budget, and with it the budget floor, is a quarter of the limit:
			// the floor under the limit it names is larger than under this one.
			for range 16 {
				f := min(floor.Budget, le.Need/4) + floor.Other
				n := memory.LimitFor(f, cfg.Headroom.Reserve)
				if n <= le.Need {
					break
				}
				le.Need = n
			}
		}
		return nil, err
	}
	if res.Pressure {
		info("source gated on this cgroup's memory pressure (resources.pressure: off to turn off)")
	}
	return rt, nil
}

// decodeWorkers is the number of workers of p's stages that declare a workers
// parameter (0 there: GOMAXPROCS), at least 1: the memory runtime narrows them
// under pressure.
func decodeWorkers(p *Pipeline) int {
	n := 0
	for _, c := range p.Stages {
		if _, ok := c.Kind.Param("workers"); ok {
			n += workersOf(c.Config)
		}
	}
	return max(n, 1)
}

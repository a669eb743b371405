package memory

import (
	"context"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"

	"github.com/psiflow/psiflow/internal/cheap"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pressure"
)

// OnHeadroom registers f to be called with every headroom report (Elastic mode,
// about every 200 ms while a graph runs), after the budget followed it: memory the
// loader holds outside the budget (a sample cache) can follow the headroom too.
// Register before the first graph runs.
func (r *Runtime) OnHeadroom(f func(pressure.HeadroomReport)) {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.onHead = append(r.onHead, f)
}

// applyHeadroom follows one headroom report.
func (r *Runtime) applyHeadroom(rep pressure.HeadroomReport) {
	defer func() {
		r.applyMu.Lock()
		fs := r.onHead
		r.applyMu.Unlock()
		for _, f := range fs {
			f(rep)
		}
	}()
	r.headGoal.Store(rep.Budget)
	r.m.allow.Set(float64(rep.Allowance))
	var evs []pause.Event
	if r.cfg.Mode == Elastic {
		r.applyMu.Lock()
		r.fitLocked(rep)
		if r.stopErr == nil {
			if r.pc != nil {
				evs = r.pauseLocked(rep)
			} else if err := r.belowFloorLocked(rep); err != nil {
				r.stopErr = err
				if r.stopRun != nil {
					r.stopRun(err)
				}
			}
		}
		r.applyMu.Unlock()
	}
	if rep.BelowFloor || r.Paused() {
		r.m.below.Set(1)
	} else {
		r.m.below.Set(0)
	}
	r.applyBudget()
	switch {
	case len(evs) > 0:
		// The pause lines say it all: no second line for the same crossing.
		for _, ev := range evs {
			r.info("%s", ev.Message())
			if r.cfg.OnPause != nil {
				r.cfg.OnPause(ev)
			}
		}
	case r.pc == nil:
		if msg := rep.Message(r.cfg.Floor); msg != "" {
			r.info("%s", msg)
		}
	}
}

// applyBudget sets the budget from the headroom's goal and the level: the floor at
// Full and Critical.
func (r *Runtime) applyBudget() {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if r.closed {
		return
	}
	goal := r.headGoal.Load()
	paused := r.Paused()
	if r.Level() >= pressure.LevelFull || paused {
		goal = r.cfg.BudgetFloor
	}
	// A paused loader's reads wait at the pause gate, before they take any
	// budget: the budget then only holds up the decoding of the reads in
	// flight at the pause (each image's decoded bytes are reserved before the
	// encoded ones are given back), one 50 ms overdraft at a time, while their
	// buffers stay resident. It is opened to its largest while paused, so the
	// drain runs at the speed of decoding; the Go heap's limit stays at the
	// floor's.
	limit := goal
	if paused {
		limit = max(goal, r.cfg.MaxBudget)
	}
	before := r.budget.Limit()
	if limit != before {
		_ = r.budget.SetLimit(limit) // limit > 0: the floors are validated positive
		r.m.budget.Set(float64(limit))
		if limit < before && r.Level() >= pressure.LevelFull {
			r.m.ran(ActionBudget, before-limit)
		}
	}
	if r.cfg.Mode == Elastic && r.cfg.Process.GoMemoryLimit {
		lim := goHeapBase + goal
		if f := r.goFit.Load(); f > 0 {
			lim = min(lim, f)
		}
		prev := debug.SetMemoryLimit(lim)
		if !r.setGo {
			r.prevGo, r.setGo = prev, true
		}
		r.m.goLimit.Set(float64(lim))
	}
}

// onLevel runs the level-driven actions (from the monitor goroutine).
func (r *Runtime) onLevel(from, to pressure.Level, _ time.Time) {
	r.level.Store(int32(to))
	r.applyMu.Lock()
	r.setWorkersLocked()
	r.applyMu.Unlock()
	if r.rb != nil {
		on := to >= pressure.LevelSome
		if on && from == pressure.LevelNormal {
			r.m.ran(ActionReadBuffers, 0)
		}
		r.rb.SetPressure(on)
	}
	r.applyBudget()
}

// shedUMA gives idle UMA chunks back at once (Critical).
func (r *Runtime) shedUMA(context.Context) error {
	if r.rb == nil {
		r.m.ran(ActionUMAIdle, 0)
		return nil
	}
	n, err := r.rb.ReleaseSpill()
	r.m.ran(ActionUMAIdle, n)
	return err
}

// shedHeap returns the Go heap's and the C heap's free memory to the kernel
// (Critical).
func (r *Runtime) shedHeap(context.Context) error {
	r.freeHeap()
	r.trimCHeap()
	return nil
}

// trimCHeap gives the C heap's free pages back ([cheap.Trim]) and counts it under
// ActionCHeap with what left the anonymous resident set meanwhile. It does
// nothing where the process has no malloc_trim (not glibc).
func (r *Runtime) trimCHeap() {
	if cheap.Available() != nil {
		return
	}
	before := residentAnon()
	if _, err := cheap.Trim(); err != nil {
		return
	}
	r.m.ran(ActionCHeap, max(0, before-residentAnon()))
}

// freeHeap runs debug.FreeOSMemory and counts it under ActionGoHeap with the bytes
// the heap released.
func (r *Runtime) freeHeap() {
	if r.quietShed.Load() {
		r.m.ran(ActionGoHeap, 0) // a settled pause: nothing to collect
		return
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	debug.FreeOSMemory()
	runtime.ReadMemStats(&after)
	r.m.ran(ActionGoHeap, max(0, int64(after.HeapReleased)-int64(before.HeapReleased)))
}

// heapAllocs returns the bytes the Go heap allocated since the program
// started (runtime/metrics: no stop of the world).
func heapAllocs() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// OnShed registers a further shed action, run at Critical and counted under action
// (one of [Actions]); f returns the bytes it gave back. It does nothing without
// Pressure or in Fixed mode.
func (r *Runtime) OnShed(action string, f func(ctx context.Context) (freed int64, err error)) {
	if r.th == nil || r.cfg.Mode != Elastic {
		return
	}
	if _, ok := r.m.count[action]; !ok {
		action = ActionUMAIdle // unknown names are counted with the idle memory
	}
	r.th.gate.OnShed(action, func(ctx context.Context) error {
		n, err := f(ctx)
		r.m.ran(action, n)
		return err
	})
}

// ShedRuns returns how often each action ran, by name (for reports and tests).
func (r *Runtime) ShedRuns() map[string]float64 {
	out := map[string]float64{}
	for _, a := range Actions {
		out[a] = float64(r.m.count[a].Load())
	}
	return out
}

package memory

import (
	"errors"
	"fmt"
	"os"
	rtmetrics "runtime/metrics"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/pressure"
)

// goMinimum is the smallest Go memory limit the runtime sets: below it the garbage
// collector would run without pause and the loader would make no progress.
const goMinimum = 16 << 20

// freeEvery bounds how often fitting forces debug.FreeOSMemory (a full collection).
const freeEvery = 500 * time.Millisecond

// fitState is what fitting remembers between headroom reports (under applyMu).
type fitState struct {
	on       bool      // the loader held more than its allowance at the last report
	lastFree time.Time // last forced FreeOSMemory
}

// goMemoryUsed is what the Go runtime holds by the measure of its own memory limit:
// all memory it mapped minus the heap it gave back.
func goMemoryUsed() int64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 || s[1].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64()) - int64(s[1].Value.Uint64())
}

// fit keeps what the loader holds (rep.Self) within what the cgroup leaves it
// (rep.Allowance), whatever the pressure level says: with no swap the kernel
// OOM-kills long before memory.pressure rises, so waiting for Critical is too late.
//
// The Go memory limit becomes what the allowance leaves after the loader's other
// memory (UMA pools, C allocations). While the loader holds more than its
// allowance it gives back the spill pool's free chunks and the Go heap's free
// pages, and decodes with one worker. Called with applyMu held.
func (r *Runtime) fitLocked(rep pressure.HeadroomReport) {
	goUsed := goMemoryUsed()
	nonGo := max(0, rep.Self-goUsed)
	r.goFit.Store(max(goMinimum, rep.Allowance-nonGo))
	over := rep.Self - rep.Allowance
	was := r.fit.on
	r.fit.on = over > 0
	if trace {
		fmt.Fprintf(os.Stderr, "psiflow-trace: self %s allowance %s current %s others %s go %s nongo %s golimit %s budget %s over %s level %s\n",
			bytesize.Human(rep.Self), bytesize.Human(rep.Allowance), bytesize.Human(rep.Current), bytesize.Human(rep.Others()),
			bytesize.Human(goUsed), bytesize.Human(nonGo), bytesize.Human(r.goFit.Load()), bytesize.Human(r.budget.Limit()), bytesize.Human(over), r.Level())
	}
	if r.fit.on != was {
		r.setWorkersLocked()
	}
	if !r.fit.on {
		return
	}
	if r.rb != nil {
		if n, err := r.rb.ReleaseSpill(); err == nil && n > 0 {
			r.m.ran(ActionUMAIdle, n)
		}
	}
	if goUsed > r.goFit.Load() && time.Since(r.fit.lastFree) >= freeEvery {
		r.fit.lastFree = time.Now()
		r.freeHeap()
	}
}

var trace = os.Getenv("PSIFLOW_ELASTIC_TRACE") != ""

// setWorkersLocked sets the decode-worker limit from the level and fitting: the
// smaller of the two wins. Called with applyMu held.
func (r *Runtime) setWorkersLocked() {
	n, decoding := r.workers.Max(), r.cfg.Workers
	switch lv := r.Level(); {
	case lv >= pressure.LevelFull || r.fit.on:
		n, decoding = 1, 1
	case lv == pressure.LevelSome:
		decoding = (r.cfg.Workers + 1) / 2
		n = decoding
	}
	if n < r.workers.Limit() {
		r.m.ran(ActionDecodeWorkers, 0)
	}
	r.workers.SetLimit(n)
	r.m.workers.Set(float64(decoding))
}

// FloorPolicy says what a loader does when the cgroup leaves it less than its floor.
type FloorPolicy string

const (
	// StopBelowFloor (the default) ends the run with a [*BelowFloorError] as soon as
	// the memory the cgroup leaves the loader now (not projected) is below its floor:
	// a loader that cannot shrink further would otherwise take the co-tenant's memory
	// or, as the OOM killer's first choice, die holding pinned memory that the kernel
	// frees only after a second kill.
	StopBelowFloor FloorPolicy = "stop"
	// RunAtFloor runs on at the floor (budget at its floor, one decode worker) and
	// leaves the outcome to the kernel.
	RunAtFloor FloorPolicy = "run"
)

// ParseFloorPolicy parses "stop" or "run".
func ParseFloorPolicy(s string) (FloorPolicy, error) {
	switch FloorPolicy(s) {
	case StopBelowFloor, RunAtFloor:
		return FloorPolicy(s), nil
	}
	return "", fmt.Errorf("below-floor policy %q: want stop or run", s)
}

// ErrBelowFloor is matched (errors.Is) by every [*BelowFloorError].
var ErrBelowFloor = errors.New("the cgroup leaves the loader less than its floor")

// BelowFloorError ends a run under [StopBelowFloor]: it names what the cgroup left,
// who held the rest and the floor.
type BelowFloorError struct {
	Report pressure.HeadroomReport
	Floor  int64
}

func (e *BelowFloorError) Error() string {
	r := e.Report
	return fmt.Sprintf("stopped: the cgroup (%s) leaves the loader %s (limit %s − others %s − reserve %s), below its floor of %s; stopping rather than risk the co-tenant's OOM kill (-below-floor run runs on at the floor)",
		r.Source, bytesize.Human(r.Current), bytesize.Human(r.Limit), bytesize.Human(r.Others()), bytesize.Human(r.Reserve), bytesize.Human(e.Floor))
}

// Is makes errors.Is(err, ErrBelowFloor) true.
func (e *BelowFloorError) Is(target error) bool { return target == ErrBelowFloor }

// belowFloorLocked returns the error that stops the run for rep, or nil. Called with
// applyMu held.
func (r *Runtime) belowFloorLocked(rep pressure.HeadroomReport) error {
	if r.cfg.BelowFloor == RunAtFloor || !rep.Limited || rep.Current >= r.cfg.Floor {
		return nil
	}
	return &BelowFloorError{Report: rep, Floor: r.cfg.Floor}
}

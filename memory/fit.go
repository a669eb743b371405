package memory

import (
	"errors"
	"fmt"
	"os"
	rtmetrics "runtime/metrics"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/memory/pause"
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
		fmt.Fprintf(os.Stderr, "psiflow-trace: self %s allowance %s current %s others %s go %s nongo %s golimit %s budget %s over %s level %s own text %s growth %s/s projected %s/s\n",
			bytesize.Human(rep.Self), bytesize.Human(rep.Allowance), bytesize.Human(rep.Current), bytesize.Human(rep.Others()),
			bytesize.Human(goUsed), bytesize.Human(nonGo), bytesize.Human(r.goFit.Load()), bytesize.Human(r.budget.Limit()), bytesize.Human(over), r.Level(), bytesize.Human(rep.OwnText()), bytesize.Human(int64(rep.Growth)), bytesize.Human(int64(rep.Projected)))
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
	case lv >= pressure.LevelFull || r.fit.on || r.Paused():
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
	// PauseBelowFloor (the default) pauses the loader while the memory the cgroup
	// leaves it now is below its floor: no new reads (those in flight finish and
	// are delivered, so nothing is delivered twice or skipped), the budget at its
	// floor, one decode worker, and what it holds beyond that given back from the
	// pause's start (the registered read pool, revoked and unregistered by the
	// readers once their reads in flight are done; the spill pool's free chunks; the
	// Go heap and the C heap; the shed actions; the program text, unlocked until
	// the resume). It resumes once the cgroup leaves it its floor plus a
	// hysteresis (package pause); its consumer sees a delay, not an error. A pause
	// longer than Config.PauseTimeout ends the run with a [*BelowFloorError], and
	// under [LeaveNoRoom] (Config.NoRoom's default) a pause in which the others
	// alone leave the loader less than its own resident set ends it with a
	// [*NoRoomError].
	PauseBelowFloor FloorPolicy = "pause"
	// StopBelowFloor ends the run with a [*BelowFloorError] as soon as
	// the memory the cgroup leaves the loader now (not projected) is below its floor:
	// a loader that cannot shrink further would otherwise take the co-tenant's memory
	// or, as the OOM killer's first choice, die holding pinned memory that the kernel
	// frees only after a second kill.
	StopBelowFloor FloorPolicy = "stop"
	// RunAtFloor runs on at the floor (budget at its floor, one decode worker) and
	// leaves the outcome to the kernel.
	RunAtFloor FloorPolicy = "run"
)

// ParseFloorPolicy parses "pause", "stop" or "run".
func ParseFloorPolicy(s string) (FloorPolicy, error) {
	switch FloorPolicy(s) {
	case PauseBelowFloor, StopBelowFloor, RunAtFloor:
		return FloorPolicy(s), nil
	}
	return "", fmt.Errorf("below-floor policy %q: want pause, stop or run", s)
}

// ErrBelowFloor is matched (errors.Is) by every [*BelowFloorError].
var ErrBelowFloor = errors.New("the cgroup leaves the loader less than its floor")

// BelowFloorError ends a run under [StopBelowFloor], or under [PauseBelowFloor]
// after a pause longer than its timeout: it names what the cgroup left, who held
// the rest and the floor.
type BelowFloorError struct {
	Report pressure.HeadroomReport
	Floor  int64
	// Paused is how long the loader had been paused (PauseBelowFloor), and
	// PauseTimeout the timeout it outlasted.
	Paused, PauseTimeout time.Duration
	// ResumeAt is what the pause waited for the cgroup to leave the loader (the
	// floor plus its hysteresis; 0 without a pause).
	ResumeAt int64
}

func (e *BelowFloorError) Error() string {
	r := e.Report
	short := "below its floor of " + bytesize.Human(e.Floor)
	if r.Current >= e.Floor && e.ResumeAt > r.Current {
		// A pause that ends short of its hysteresis, not below the floor.
		short = fmt.Sprintf("above its floor of %s but short of the %s it resumes at", bytesize.Human(e.Floor), bytesize.Human(e.ResumeAt))
	}
	left := fmt.Sprintf("the cgroup (%s) leaves the loader %s (limit %s − others %s − reserve %s), %s",
		r.Source, bytesize.Human(r.Current), bytesize.Human(r.Limit), bytesize.Human(r.Others()), bytesize.Human(r.Reserve), short)
	if e.Paused > 0 {
		return fmt.Sprintf("stopped after a pause of %v, longer than the pause timeout of %v: %s; stopping rather than risk the co-tenant's OOM kill (-pause-timeout 0 waits without end)",
			e.Paused.Round(time.Second), e.PauseTimeout, left)
	}
	return fmt.Sprintf("stopped: %s; stopping rather than risk the co-tenant's OOM kill (-below-floor pause waits for memory, run runs on at the floor)", left)
}

// Is makes errors.Is(err, ErrBelowFloor) true.
func (e *BelowFloorError) Is(target error) bool { return target == ErrBelowFloor }

// belowFloorLocked returns the error that stops the run for rep, or nil. Called with
// applyMu held.
func (r *Runtime) belowFloorLocked(rep pressure.HeadroomReport) error {
	if r.cfg.BelowFloor != StopBelowFloor || !rep.Limited || rep.Current >= r.cfg.Floor {
		return nil
	}
	return &BelowFloorError{Report: rep, Floor: r.cfg.Floor}
}

// LimitBelowFloorError refuses to start a loader whose cgroup memory limit
// cannot hold its floor and the margin a pause needs to end
// ([pause.MinHysteresis]) even with nothing else in the cgroup: under
// [PauseBelowFloor] it would pause at once and never resume (or resume on a
// margin too thin to run in, and meet the OOM killer), under [StopBelowFloor]
// stop at its first sample. It names the limit, the reserve, the floor and the
// smallest limit that holds them.
type LimitBelowFloorError struct {
	// Sample is the cgroup's memory sample at start.
	Sample pressure.MemorySample
	// Reserve is what the headroom keeps free, Floor the loader's floor and
	// Margin the room above it that a pause needs to end.
	Reserve, Floor, Margin int64
	// Need is the smallest limit that holds Floor + Margin after the reserve.
	Need int64
}

func (e *LimitBelowFloorError) Error() string {
	return fmt.Sprintf("the memory limit of %s (%s) is too small for this loader: less the reserve of %s it leaves %s even with nothing else in the cgroup, less than the loader's floor of %s (a batch of encoded files, decode scratch per worker, two batches of output) and the %s above it that a pause needs to end; it would never read a sample. Raise the limit to at least %s, or lower the floor (a smaller batch size, fewer decode workers, a smaller output size)",
		bytesize.Human(e.Sample.Limit), e.Sample.Source, bytesize.Human(e.Reserve), bytesize.Human(e.Sample.Limit-e.Reserve),
		bytesize.Human(e.Floor), bytesize.Human(e.Margin), bytesize.Human(e.Need))
}

// Is makes errors.Is(err, ErrBelowFloor) true.
func (e *LimitBelowFloorError) Is(target error) bool { return target == ErrBelowFloor }

// LimitFor is the smallest memory limit that leaves floor and the margin a
// pause needs to end ([pause.MinHysteresis]) after the headroom's reserve
// (reserve, or 0 for its default, [pressure.DefaultReserve] of the limit), with
// nothing else in the cgroup: below it [New] refuses an Elastic start with a
// [*LimitBelowFloorError].
func LimitFor(floor, reserve int64) int64 {
	need := floor + pause.MinHysteresis
	if reserve > 0 {
		return need + reserve
	}
	l := max(need+8<<20, (need*16+14)/15) // the reserve limit/16, at least 8 MiB
	if l > 16*pressure.MaxDefaultReserve {
		l = need + pressure.MaxDefaultReserve // where limit/16 is above the cap
	}
	return l
}

// checkLimit refuses an Elastic start under a memory limit that cannot hold
// the floor and a pause's margin ([LimitBelowFloorError]); [RunAtFloor] runs on
// and leaves it to the kernel. It samples with a headroom of its own, so that
// the runtime's first sample sees no growth between the two. A failed sample
// is not an error here: the runtime reports it with its own first sample.
func checkLimit(cfg Config) error {
	if cfg.Mode != Elastic || cfg.BelowFloor == RunAtFloor {
		return nil
	}
	hc := cfg.Headroom
	if hc.Interval == 0 {
		hc.Interval = HeadroomInterval
	}
	hc.Floor, hc.BudgetFloor, hc.Max = cfg.Floor, cfg.BudgetFloor, cfg.MaxBudget
	h, err := pressure.NewHeadroom(hc)
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	rep, err := h.Update()
	if err != nil || !rep.Limited || rep.Limit-rep.Reserve >= cfg.Floor+pause.MinHysteresis {
		return nil
	}
	return &LimitBelowFloorError{Sample: rep.MemorySample, Reserve: rep.Reserve, Floor: cfg.Floor, Margin: pause.MinHysteresis,
		Need: LimitFor(cfg.Floor, cfg.Headroom.Reserve)}
}

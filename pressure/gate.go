package pressure

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Policy turns levels into permits. Zero fields take the defaults named.
//
// The policy, applied by [Gate.Apply] at every level observation:
//   - Normal: after Quiet without pressure, add Step permits every StepEvery until
//     MaxPermits (additive recovery).
//   - Some: limit = max(MinPermits, floor(limit × Cut)), at most once per CutEvery
//     (multiplicative cut); a gate that was stopped reopens at MinPermits.
//   - Full: limit = FullPermits (default 0: no new permits), never raised by Full
//     above the limit Some left; permits already held (in-flight work) are released
//     as usual.
//   - Critical: limit = 0, and the registered shed callbacks run, at most once per
//     ShedEvery while the level stays Critical.
type Policy struct {
	// MaxPermits is the limit at Normal (default 64).
	MaxPermits int
	// MinPermits is the floor of a cut at Some (default 1). Zero lets repeated cuts at
	// Some close the gate.
	MinPermits int
	// Cut multiplies the limit at each cut, in (0, 1) (default 0.5).
	Cut float64
	// CutEvery is the least time between two cuts while Some lasts (default 1s).
	CutEvery time.Duration
	// Quiet is how long the level must stay Normal before recovery starts (default 2s).
	Quiet time.Duration
	// Step is the number of permits added per recovery step (default MaxPermits/16, at least 1).
	Step int
	// StepEvery is the time between recovery steps (default 250ms).
	StepEvery time.Duration
	// ShedEvery is the least time between two sheds while Critical lasts (default 1s).
	ShedEvery time.Duration
	// FullPermits is the limit at Full (default 0: stopped). A loader whose memory is
	// bounded by other means (a byte budget at its floor, fewer decode workers) keeps
	// a few permits at Full so that it runs at its floor instead of stopping: with
	// batches of many elements, a stopped gate that admits one element per Trickle
	// delivers no batch for tens of seconds.
	FullPermits int
	// DisableMinDefault keeps MinPermits at 0 when it is 0 (the zero value otherwise
	// means the default 1).
	DisableMinDefault bool
	// Trickle guarantees progress while the gate is stopped: when the limit is 0,
	// nothing admitted is still in flight and someone waits, one waiter is admitted
	// every Trickle (default 500ms; negative: never). A loader whose cgroup stays at
	// its limit (a co-tenant holding the rest, reclaim reported without stall) then
	// runs at its floor, one element at a time, instead of waiting for ever.
	Trickle time.Duration
}

func (p *Policy) fill() {
	if p.MaxPermits == 0 {
		p.MaxPermits = 64
	}
	if p.MinPermits == 0 && !p.DisableMinDefault {
		p.MinPermits = 1
	}
	if p.Cut == 0 {
		p.Cut = 0.5
	}
	if p.CutEvery == 0 {
		p.CutEvery = time.Second
	}
	if p.Quiet == 0 {
		p.Quiet = 2 * time.Second
	}
	if p.Step == 0 {
		p.Step = max(1, p.MaxPermits/16)
	}
	if p.StepEvery == 0 {
		p.StepEvery = 250 * time.Millisecond
	}
	if p.ShedEvery == 0 {
		p.ShedEvery = time.Second
	}
	if p.Trickle == 0 {
		p.Trickle = 500 * time.Millisecond
	}
}

// Validate reports an inconsistent policy (after defaults are applied).
func (p Policy) Validate() error {
	p.fill()
	switch {
	case p.MaxPermits < 1:
		return fmt.Errorf("gate policy: MaxPermits %d < 1", p.MaxPermits)
	case p.MinPermits < 0 || p.MinPermits > p.MaxPermits:
		return fmt.Errorf("gate policy: MinPermits %d outside [0, MaxPermits %d]", p.MinPermits, p.MaxPermits)
	case p.FullPermits < 0 || p.FullPermits > p.MaxPermits:
		return fmt.Errorf("gate policy: FullPermits %d outside [0, MaxPermits %d]", p.FullPermits, p.MaxPermits)
	case !(p.Cut > 0 && p.Cut < 1):
		return fmt.Errorf("gate policy: Cut %g outside (0, 1)", p.Cut)
	case p.Step < 1:
		return fmt.Errorf("gate policy: Step %d < 1", p.Step)
	case p.CutEvery < 0 || p.Quiet < 0 || p.StepEvery <= 0 || p.ShedEvery < 0:
		return fmt.Errorf("gate policy: negative duration (CutEvery %s, Quiet %s, StepEvery %s, ShedEvery %s)", p.CutEvery, p.Quiet, p.StepEvery, p.ShedEvery)
	}
	return nil
}

// Decision names one kind of gate decision; every decision is counted ([Gate.Stats]).
type Decision int

const (
	// DecisionAdmit: a permit was granted without waiting.
	DecisionAdmit Decision = iota
	// DecisionAdmitAfterWait: a permit was granted after waiting.
	DecisionAdmitAfterWait
	// DecisionRefuse: TryAcquire found no permit.
	DecisionRefuse
	// DecisionCancel: a waiting Acquire gave up because its context ended.
	DecisionCancel
	// DecisionCut: the limit was cut multiplicatively (Some).
	DecisionCut
	// DecisionStop: the limit went to zero (Full or Critical).
	DecisionStop
	// DecisionShed: shed callbacks were run (Critical).
	DecisionShed
	// DecisionShedError: a shed callback returned an error.
	DecisionShedError
	// DecisionRecover: the limit grew by one recovery step.
	DecisionRecover
	// DecisionReopen: the limit went from zero to positive.
	DecisionReopen
	// DecisionTrickle: a waiter was admitted while the gate was stopped, because
	// nothing was in flight for Policy.Trickle (progress at the floor).
	DecisionTrickle
	numDecisions
)

var decisionNames = [...]string{"admit", "admit_after_wait", "refuse", "cancel", "cut", "stop", "shed", "shed_error", "recover", "reopen", "trickle"}

// String returns the decision's metric label, e.g. "admit" or "cut".
func (d Decision) String() string {
	if d >= 0 && d < numDecisions {
		return decisionNames[d]
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Decisions lists every decision kind, for exporters.
func Decisions() []Decision {
	out := make([]Decision, numDecisions)
	for i := range out {
		out[i] = Decision(i)
	}
	return out
}

// GateStats is a snapshot of a gate.
type GateStats struct {
	Level   Level
	Limit   int
	InUse   int
	Waiting int
	// Decisions counts each decision kind, indexed by [Decision].
	Decisions [numDecisions]uint64
}

// ShedFunc frees memory when the level is Critical: evict preemptible buffers, drop
// page cache of consumed files, shrink pools. It should return promptly.
type ShedFunc func(ctx context.Context) error

type waiter struct {
	ready chan struct{}
	// granted is set under the gate's lock when the waiter received a permit.
	granted bool
}

// Gate admits work in two phases: Acquire a permit first, then take buffers, then
// submit; Release the permit when the work is done. Nothing waits while holding
// buffers, because the only wait is in Acquire, before any buffer is taken.
//
// The number of permits follows the pressure level through the [Policy]
// ([Gate.Apply], [Gate.Advance]). A lower limit never revokes permits already held:
// in-flight work completes, and new Acquires wait until the permits in use fall
// below the limit. Waiters are served in FIFO order.
//
// Gate satisfies flow.Gate (Acquire(ctx) error; Release()) structurally. It is safe
// for concurrent use.
type Gate struct {
	mu      sync.Mutex
	p       Policy
	limit   int
	inUse   int
	waiters []*waiter
	level   Level
	// lastCut and lastShed rate-limit cuts and sheds; quietSince is when the level
	// last became Normal; lastStep is the time of the last recovery step.
	lastCut, lastShed, quietSince, lastStep time.Time
	// idleSince is when a stopped gate was first seen with waiters and nothing in
	// flight (zero otherwise): the start of the wait before a trickle.
	idleSince time.Time
	counts    [numDecisions]uint64

	shedMu sync.Mutex
	sheds  []namedShed
}

type namedShed struct {
	name string
	f    ShedFunc
}

// NewGate returns a gate at LevelNormal with MaxPermits permits.
func NewGate(p Policy) (*Gate, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p.fill()
	return &Gate{p: p, limit: p.MaxPermits}, nil
}

// Policy returns the policy with defaults applied.
func (g *Gate) Policy() Policy { return g.p }

// Acquire waits for a permit or for ctx to end. On success the caller must call
// Release exactly once.
func (g *Gate) Acquire(ctx context.Context) error {
	g.mu.Lock()
	if g.inUse < g.limit && len(g.waiters) == 0 {
		g.inUse++
		g.counts[DecisionAdmit]++
		g.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		g.counts[DecisionCancel]++
		level, inUse, limit := g.level, g.inUse, g.limit
		g.mu.Unlock()
		return fmt.Errorf("pressure gate (level %s, %d/%d permits in use): %w", level, inUse, limit, err)
	}
	w := &waiter{ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if w.granted {
		// Granted while we were giving up: keep the permit accounting right.
		g.counts[DecisionAdmitAfterWait]--
		g.inUse--
		g.grantLocked()
	} else {
		for i, x := range g.waiters {
			if x == w {
				g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
				break
			}
		}
	}
	g.counts[DecisionCancel]++
	level, inUse, limit := g.level, g.inUse, g.limit
	g.mu.Unlock()
	return fmt.Errorf("pressure gate (level %s, %d/%d permits in use): %w", level, inUse, limit, ctx.Err())
}

// TryAcquire takes a permit if one is free without waiting.
func (g *Gate) TryAcquire() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inUse < g.limit && len(g.waiters) == 0 {
		g.inUse++
		g.counts[DecisionAdmit]++
		return true
	}
	g.counts[DecisionRefuse]++
	return false
}

// Release returns a permit taken by Acquire or TryAcquire. Releasing a permit that is
// not held is a programming error, like unlocking an unlocked mutex, and panics.
func (g *Gate) Release() {
	g.mu.Lock()
	if g.inUse <= 0 {
		g.mu.Unlock()
		panic("pressure: Gate.Release without a permit held")
	}
	g.inUse--
	if len(g.waiters) > 0 {
		g.grantLocked()
	}
	g.mu.Unlock()
}

// grantLocked hands free permits to waiters in FIFO order.
func (g *Gate) grantLocked() {
	for len(g.waiters) > 0 && g.inUse < g.limit {
		w := g.waiters[0]
		g.waiters[0] = nil
		g.waiters = g.waiters[1:]
		g.inUse++
		w.granted = true
		g.counts[DecisionAdmitAfterWait]++
		close(w.ready)
	}
}

// setLimitLocked changes the limit, counts stop/reopen and wakes waiters.
func (g *Gate) setLimitLocked(n int) {
	n = max(0, min(n, g.p.MaxPermits))
	if n == g.limit {
		return
	}
	if n == 0 {
		g.counts[DecisionStop]++
	} else if g.limit == 0 {
		g.counts[DecisionReopen]++
	}
	g.limit = n
	g.grantLocked()
}

// Apply applies the policy for an observation of level l at time now. Call it for
// every event (not only for level changes): cuts and sheds repeat, rate-limited,
// while the level lasts. It returns true when the caller should run the shed
// callbacks ([Gate.Shed]); Apply itself never runs them, so it never blocks.
func (g *Gate) Apply(l Level, now time.Time) (shed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.level
	g.level = l
	switch l {
	case LevelNormal:
		if prev != LevelNormal {
			g.quietSince = now
			g.lastStep = time.Time{}
		}
	case LevelSome:
		if prev == LevelSome && now.Sub(g.lastCut) < g.p.CutEvery {
			return false
		}
		g.lastCut = now
		n := max(g.p.MinPermits, int(math.Floor(float64(g.limit)*g.p.Cut)))
		if n < g.limit {
			g.counts[DecisionCut]++
		}
		g.setLimitLocked(n)
	case LevelFull:
		n := g.p.FullPermits
		if g.limit > 0 {
			n = min(n, g.limit)
		}
		g.setLimitLocked(n)
	case LevelCritical:
		g.setLimitLocked(0)
		if prev != LevelCritical || now.Sub(g.lastShed) >= g.p.ShedEvery {
			g.lastShed = now
			return true
		}
	}
	return false
}

// Advance performs the recovery steps due at now (additive increase after Quiet at
// Normal). It returns when the next step is due, or the zero time if none is pending.
func (g *Gate) Advance(now time.Time) (next time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.limit == 0 && g.level >= LevelFull && g.p.Trickle > 0 {
		// Stopped: make sure something still moves (see Policy.Trickle). The
		// caller is asked back every Trickle while the gate stays stopped.
		switch {
		case g.inUse > 0 || len(g.waiters) == 0:
			g.idleSince = time.Time{}
		case g.idleSince.IsZero():
			g.idleSince = now
		case now.Sub(g.idleSince) >= g.p.Trickle:
			w := g.waiters[0]
			g.waiters[0] = nil
			g.waiters = g.waiters[1:]
			g.inUse++
			w.granted = true
			g.counts[DecisionTrickle]++
			close(w.ready)
			g.idleSince = time.Time{}
		}
		return now.Add(g.p.Trickle)
	}
	g.idleSince = time.Time{}
	if g.level != LevelNormal || g.limit >= g.p.MaxPermits {
		return time.Time{}
	}
	start := g.quietSince.Add(g.p.Quiet)
	if now.Before(start) {
		return start
	}
	due := start
	if !g.lastStep.IsZero() {
		due = g.lastStep.Add(g.p.StepEvery)
	}
	for !now.Before(due) && g.limit < g.p.MaxPermits {
		g.counts[DecisionRecover]++
		g.setLimitLocked(g.limit + g.p.Step)
		g.lastStep = due
		due = due.Add(g.p.StepEvery)
	}
	if g.limit >= g.p.MaxPermits {
		return time.Time{}
	}
	return due
}

// OnShed registers a shed callback, run by [Gate.Shed] in registration order. The
// name appears in errors and reports.
func (g *Gate) OnShed(name string, f ShedFunc) {
	g.shedMu.Lock()
	g.sheds = append(g.sheds, namedShed{name, f})
	g.shedMu.Unlock()
}

// Shed runs every registered shed callback and returns their errors joined, each
// naming its callback. It counts one DecisionShed and one DecisionShedError per
// failing callback.
func (g *Gate) Shed(ctx context.Context) error {
	g.shedMu.Lock()
	sheds := append([]namedShed(nil), g.sheds...)
	g.shedMu.Unlock()
	var errs []error
	for _, s := range sheds {
		if err := s.f(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shed %s: %w", s.name, err))
		}
	}
	g.mu.Lock()
	g.counts[DecisionShed]++
	g.counts[DecisionShedError] += uint64(len(errs))
	g.mu.Unlock()
	return errors.Join(errs...)
}

// Stats returns a snapshot of the gate.
func (g *Gate) Stats() GateStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return GateStats{Level: g.level, Limit: g.limit, InUse: g.inUse, Waiting: len(g.waiters), Decisions: g.counts}
}

// Limit returns the current number of permits.
func (g *Gate) Limit() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit
}

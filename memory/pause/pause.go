package pause

import (
	"fmt"
	"sync"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
)

// DefaultTimeout is how long a pause may last by default before the run ends with
// the below-floor error.
const DefaultTimeout = 10 * time.Minute

// Forever, as Config.Timeout, lets a pause last without end.
const Forever time.Duration = -1

// MinHysteresis is the smallest margin above the floor a resume waits for.
const MinHysteresis = 4 << 20

// DefaultSettle is how long, by default, the cgroup must leave a paused loader
// at least its floor (the projection of growing others included) before it
// resumes without the hysteresis (Config.Settle).
const DefaultSettle = time.Second

// DefaultCalm is how long, by default, a paused loader must have been left its
// resume point with the others not growing before it resumes (Config.Calm).
const DefaultCalm = 300 * time.Millisecond

// DefaultRiseTolerance is the largest projected growth of the others (their
// growth over the headroom's lookahead, a second) that still counts as not
// rising by default (Config.RiseTolerance): the loader's own resident set
// jitters by a few hundred KiB between samples, and the headroom sees that as
// the others' growth.
const DefaultRiseTolerance = 4 << 20

// Config configures a [Controller].
type Config struct {
	// Floor is the loader's smallest working set that still makes progress; the
	// loader pauses when the cgroup leaves it less. Required.
	Floor int64
	// Hysteresis is how far above the floor the cgroup's leave must be before the
	// loader resumes: default max(Floor/4, MinHysteresis), so that a trainer
	// hovering at the line does not make it pause and resume at every sample.
	Hysteresis int64
	// Timeout ends a pause that lasted longer ([Event.Kind] TimedOut): 0 is
	// DefaultTimeout, [Forever] (any negative value) never.
	Timeout time.Duration
	// Settle resumes a pause once every reading for this long left the loader at
	// least its floor, short of the hysteresis (Reading.Current, the projection
	// of growing others when there is one: what a running loader pauses on): a
	// co-tenant that settled there (a trainer waiting for the loader's next
	// batch, its memory idle) would otherwise hold the loader paused until the
	// timeout, and the trainer with it; a co-tenant hovering at the line makes
	// it pause and resume at most once per Settle. 0 is DefaultSettle, [Forever]
	// (any negative value) never: only the hysteresis resumes.
	Settle time.Duration
	// Calm is how long the readings must have left the loader its resume point
	// (the floor plus the hysteresis, or the floor for a pause the projection
	// alone started), the others not rising, before it resumes: a co-tenant's
	// ramp can stall for a sample (its own page faults, a busy CPU), and a
	// loader that resumed then paused again a moment later with less memory
	// left than at the first pause (the spike grid at 90% of 256 MiB: resumed
	// 200 ms into its pause while the co-tenant rose, then both OOM-killed). 0
	// is DefaultCalm, [Forever] (any negative value) none: the first reading at
	// the resume point resumes (the others still must not rise).
	Calm time.Duration
	// RiseTolerance is the largest projected growth of the others (Reading.Now
	// − Reading.Current of a projected reading) that counts as not rising: a
	// reading whose others rise faster never resumes a pause, and starts the
	// settling and the calm again. 0 is DefaultRiseTolerance.
	RiseTolerance int64
}

func (c *Config) fill() {
	if c.Hysteresis == 0 {
		c.Hysteresis = max(c.Floor/4, MinHysteresis)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Settle == 0 {
		c.Settle = DefaultSettle
	}
	if c.Calm == 0 {
		c.Calm = DefaultCalm
	}
	if c.RiseTolerance == 0 {
		c.RiseTolerance = DefaultRiseTolerance
	}
}

// Validate names the first field that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Floor <= 0:
		return fmt.Errorf("pause: floor %d bytes: must be positive", c.Floor)
	case c.Hysteresis < 0:
		return fmt.Errorf("pause: hysteresis %d bytes: must not be negative", c.Hysteresis)
	case c.RiseTolerance < 0:
		return fmt.Errorf("pause: rise tolerance %d bytes: must not be negative", c.RiseTolerance)
	}
	return nil
}

// Reading is what the cgroup leaves the loader at one instant.
type Reading struct {
	At time.Time
	// Current is what the loader may hold now: limit − others − reserve (it can be
	// negative).
	Current int64
	// Limit, Others and Reserve explain Current in messages: Current = Limit −
	// Others − Reserve.
	Limit, Others, Reserve int64
	// Projected says that Others is what the others are expected to hold a moment
	// ahead (they are growing), not what they hold now.
	Projected bool
	// Now is what the cgroup leaves the loader at this instant when Current is a
	// projection (Projected; Now ≥ Current then); ignored otherwise.
	Now int64
}

// rising reports that the others grow faster than tolerance: their projection a
// lookahead ahead is more than tolerance above what they hold now.
func (r Reading) rising(tolerance int64) bool {
	return r.Projected && r.Now-r.Current > tolerance
}

// now is what the reading says the cgroup leaves the loader at this instant.
func (r Reading) now() int64 {
	if r.Projected {
		return max(r.Now, r.Current)
	}
	return r.Current
}

// Kind is what a reading changed.
type Kind int

// Event kinds.
const (
	// Paused: the loader pauses from now on.
	Paused Kind = iota + 1
	// Resumed: the pause is over.
	Resumed
	// TimedOut: the pause lasted longer than the timeout; the run should end.
	TimedOut
	// Left: the others alone leave the paused loader less than its own resident
	// set (Event.Own) and a margin (Event.Margin): the run ends. The memory
	// runtime decides it, not the [Controller].
	Left
)

func (k Kind) String() string {
	switch k {
	case Paused:
		return "paused"
	case Resumed:
		return "resumed"
	case TimedOut:
		return "timed out"
	case Left:
		return "left"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Event is a change of state, with the reading that caused it.
type Event struct {
	Kind    Kind
	Reading Reading
	// Floor and Timeout repeat the configuration, for messages; Hysteresis is
	// the margin above the floor this pause waits for (0 for a pause the
	// others' growth alone started: see [Controller.Observe]).
	Floor, Hysteresis int64
	Timeout           time.Duration
	// Settle repeats Config.Settle (negative: a pause waits for the hysteresis).
	Settle time.Duration
	// Lasted is how long the pause lasted (Resumed, TimedOut, Left).
	Lasted time.Duration
	// Own is the loader's own resident memory that reclaim cannot take, and
	// Margin the room both processes' code needs beside it (Left).
	Own, Margin int64
}

// Message is the line to show for the event.
func (e Event) Message() string {
	r := e.Reading
	others := "others"
	if r.Projected {
		others = "others growing to"
	}
	left := fmt.Sprintf("the cgroup leaves the loader %s (limit %s − %s %s − reserve %s)",
		bytesize.Human(r.Current), bytesize.Human(r.Limit), others, bytesize.Human(r.Others), bytesize.Human(r.Reserve))
	switch e.Kind {
	case Paused:
		until := "it waits without end (pause timeout 0)"
		if e.Timeout > 0 {
			until = fmt.Sprintf("a pause longer than %v ends the run", e.Timeout)
		}
		resume := fmt.Sprintf("no reads until it leaves %s", bytesize.Human(e.Floor+e.Hysteresis))
		if e.Settle > 0 && e.Hysteresis > 0 {
			resume += fmt.Sprintf(", or its floor for %v", e.Settle)
		}
		if r.Projected && r.Now >= e.Floor {
			resume = fmt.Sprintf("no reads until the growth stops and it leaves %s (%s now)",
				bytesize.Human(e.Floor), bytesize.Human(r.Now))
		}
		return fmt.Sprintf("paused: %s, below its floor of %s: %s; %s",
			left, bytesize.Human(e.Floor), resume, until)
	case Resumed:
		return fmt.Sprintf("resumed after a pause of %v: %s, above its floor of %s",
			e.Lasted.Round(time.Millisecond), left, bytesize.Human(e.Floor))
	case TimedOut:
		return fmt.Sprintf("paused for %v, longer than the pause timeout of %v: %s, %s",
			e.Lasted.Round(time.Millisecond), e.Timeout, left, e.Short())
	case Left:
		hold := "hold"
		if r.Projected {
			hold = "grow to" // within the few tens of milliseconds the decision looks ahead
		}
		return fmt.Sprintf("left after a pause of %v: the others %s %s of the limit of %s, which leaves %s, less than the paused loader's own %s and the %s both processes' code needs: both cannot fit, so the loader ends its run rather than be the reason the co-tenant is OOM-killed",
			e.Lasted.Round(time.Millisecond), hold, bytesize.Human(r.Others), bytesize.Human(r.Limit), bytesize.Human(r.Limit-r.Others),
			bytesize.Human(e.Own), bytesize.Human(e.Margin))
	}
	return ""
}

// ResumeAt is what the cgroup must leave the loader for this pause to resume
// short of the settle rule: the floor plus the pause's hysteresis.
func (e Event) ResumeAt() int64 { return e.Floor + e.Hysteresis }

// Short says how what the reading leaves the loader falls short of a resume:
// "below its floor of F" or, where it is at the floor or above but short of
// the hysteresis, "above its floor of F but short of the R it resumes at" (a
// pause that times out there must not say that less than the floor was left).
func (e Event) Short() string {
	if e.Reading.Current < e.Floor {
		return "below its floor of " + bytesize.Human(e.Floor)
	}
	return fmt.Sprintf("above its floor of %s but short of the %s it resumes at", bytesize.Human(e.Floor), bytesize.Human(e.ResumeAt()))
}

// Controller turns readings into pauses and resumes. Safe for concurrent use.
type Controller struct {
	cfg Config

	mu       sync.Mutex
	paused   bool
	since    time.Time     // start of the pause in progress
	total    time.Duration // of the pauses that ended
	pauses   int
	timedOut bool
	// short: in this pause the cgroup left the loader less than its floor at
	// some instant (not only in a projection), so the resume waits for the
	// hysteresis too.
	short bool
	// steady: the start of the readings in a row of this pause that left the
	// loader at least its floor, the others not rising (zero: the last one did
	// not).
	steady time.Time
	// good: the start of the readings in a row of this pause that left the
	// loader its resume point, the others not rising (zero: the last one did not).
	good time.Time
}

// New checks cfg and returns a controller that is not paused.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fill()
	return &Controller{cfg: cfg}, nil
}

// Config returns the configuration with its defaults.
func (c *Controller) Config() Config { return c.cfg }

// Observe takes one reading (in time order) and returns the event it causes, if
// any: Paused when a running loader is left less than its floor (now or in the
// projection of growing others), Resumed when a paused one has been left at
// least the floor plus the hysteresis (at most half of the way from the floor
// to limit − reserve, the most the limit could ever leave it) for Config.Calm
// with the others not rising, TimedOut (once) when a pause has lasted longer
// than the timeout.
//
// A pause that only the projection started, while the cgroup still left the
// loader its floor, resumes without the hysteresis: once the growth stops
// (the others rise by no more than Config.RiseTolerance a lookahead ahead) and
// the reading leaves the floor, for Config.Calm. Such a pause gives memory
// back ahead of a peak; a co-tenant that stops growing at a share that leaves
// the loader its floor but not the floor plus the hysteresis would otherwise
// hold it paused for ever, where the loader runs. Once any reading of the
// pause left less than the floor, the hysteresis applies, but only until the
// readings (their projections included) have left at least the floor, the
// others not rising, for Config.Settle: then the pause resumes at the floor
// (the co-tenant settled short of the hysteresis; a trainer that waits for the
// loader's next batch gives nothing more back, and the pause would last until
// the timeout with the trainer stalled behind it). No reading whose others
// rise resumes a pause: a co-tenant still ramping takes what the loader would
// read into.
func (c *Controller) Observe(r Reading) (Event, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	starts := !c.paused && r.Current < c.cfg.Floor
	if starts {
		c.short = false
	}
	if r.now() < c.cfg.Floor { // never while running: now ≥ Current ≥ the floor
		c.short = true
	}
	ev := Event{Reading: r, Floor: c.cfg.Floor, Hysteresis: c.hysteresis(r.Limit, r.Reserve), Timeout: c.cfg.Timeout, Settle: c.cfg.Settle}
	if !c.short {
		ev.Hysteresis = 0
	}
	rising := r.rising(c.cfg.RiseTolerance)
	since := func(t *time.Time, ok bool) time.Duration {
		switch {
		case starts || !ok:
			*t = time.Time{}
			return -1
		case t.IsZero():
			*t = r.At
		}
		return r.At.Sub(*t)
	}
	steady := since(&c.steady, !rising && r.Current >= c.cfg.Floor)
	good := since(&c.good, !rising && r.Current >= c.cfg.Floor+ev.Hysteresis)
	settled := c.cfg.Settle > 0 && steady >= c.cfg.Settle
	calm := good >= 0 && (c.cfg.Calm < 0 || good >= c.cfg.Calm)
	switch {
	case starts:
		c.paused, c.since, c.timedOut = true, r.At, false
		c.pauses++
		ev.Kind = Paused
		return ev, true
	case c.paused && (calm || settled):
		ev.Lasted = max(0, r.At.Sub(c.since))
		c.total += ev.Lasted
		c.paused = false
		ev.Kind = Resumed
		return ev, true
	case c.paused && !c.timedOut && c.cfg.Timeout > 0 && r.At.Sub(c.since) > c.cfg.Timeout:
		c.timedOut = true
		ev.Lasted = r.At.Sub(c.since)
		ev.Kind = TimedOut
		return ev, true
	}
	return Event{}, false
}

// ResumeAt is what the cgroup must leave a paused loader, under limit and reserve,
// for [Controller.Observe] to resume it: the floor plus the hysteresis, the
// hysteresis capped as Observe caps it. A limit of 0 or less (unknown) leaves the
// configured hysteresis. Messages that name the resume point use it, so that they
// say what the controller does.
func (c *Controller) ResumeAt(limit, reserve int64) int64 {
	return c.cfg.Floor + c.hysteresis(limit, reserve)
}

// hysteresis is the margin a resume waits for under limit and reserve: the
// configured one, but at most half of what lies between the floor and the most
// the limit could ever leave the loader (limit − reserve, nothing else in the
// cgroup), so that under a small limit a pause can end at all; 0 when the limit
// cannot even hold the floor.
func (c *Controller) hysteresis(limit, reserve int64) int64 {
	if limit <= 0 {
		return c.cfg.Hysteresis
	}
	return min(c.cfg.Hysteresis, max(0, (limit-reserve-c.cfg.Floor)/2))
}

// PausedFor returns how long the pause in progress has lasted at now (0 when
// not paused).
func (c *Controller) PausedFor(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.paused {
		return 0
	}
	return max(0, now.Sub(c.since))
}

// Paused reports whether the loader is paused now.
func (c *Controller) Paused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused
}

// Stats returns the number of pauses so far and the time paused until now (the
// pause in progress included).
func (c *Controller) Stats(now time.Time) (pauses int, paused time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	paused = c.total
	if c.paused {
		paused += max(0, now.Sub(c.since))
	}
	return c.pauses, paused
}

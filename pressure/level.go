package pressure

import (
	"fmt"
	"time"
)

// Level is the pressure level the model derives from events.
type Level int

const (
	// LevelNormal: no pressure worth acting on.
	LevelNormal Level = iota
	// LevelSome: some tasks stall on memory; the gate cuts permits.
	LevelSome
	// LevelFull: all tasks stall at once; the gate admits nothing new.
	LevelFull
	// LevelCritical: an OOM is near or happened; the gate admits nothing and sheds.
	LevelCritical
	numLevels
)

var levelNames = [...]string{"normal", "some", "full", "critical"}

// String returns "normal", "some", "full" or "critical".
func (l Level) String() string {
	if l >= 0 && l < numLevels {
		return levelNames[l]
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// ParseLevel is the inverse of [Level.String].
func ParseLevel(s string) (Level, error) {
	for i, n := range levelNames {
		if n == s {
			return Level(i), nil
		}
	}
	return 0, fmt.Errorf("unknown pressure level %q (want normal, some, full or critical)", s)
}

// ModelConfig configures a [Model]. Zero fields take the defaults named.
type ModelConfig struct {
	// SomeEnter and SomeExit are the "some" stall shares (0..1) of a polled sample
	// that enter LevelSome and, once in it, keep it. Defaults 0.02 and 0.005.
	SomeEnter, SomeExit float64
	// FullEnter and FullExit do the same for "full" shares and LevelFull.
	// Defaults 0.02 and 0.005.
	FullEnter, FullExit float64
	// CriticalFull is the "full" share (polled or a full trigger's threshold share)
	// at or above which the level is Critical. Default 0.5.
	CriticalFull float64
	// Hold is how long one notification (a trigger firing, a vmpressure event, a
	// memory-events increment) keeps its level asserted. A trigger fires at most once
	// per window while its condition lasts, so a trigger's assertion lasts at least
	// two of its windows whatever Hold says. Default 4s.
	Hold time.Duration
	// MinDwell is the least time spent in a level before the model goes down from it;
	// going up is immediate. Default 1s.
	MinDwell time.Duration
	// Signals maps the non-PSI signals to the level they assert; a signal mapped to
	// LevelNormal is counted but asserts nothing. Nil takes DefaultSignalLevels().
	Signals map[Signal]Level
}

// DefaultSignalLevels returns (a fresh copy of) the default mapping of non-PSI signals
// to levels.
//
// vmpressure "low" fires whenever reclaim runs, which is routine in a cgroup full of
// page cache, so it asserts nothing; "medium" asserts Some; "critical" asserts
// Critical. memory.events "high" and "max" (v1: failcnt) also grow with cheap reclaim
// of clean page cache at the limit; the PSI lines say whether that reclaim costs
// anything, so they assert Some only (measured here: a reader in a 256 MiB group full
// of page cache raised v1 failcnt by 67,000 in its first 2 s, with PSI some at 5%).
// "oom" and "oom_kill" assert Critical.
func DefaultSignalLevels() map[Signal]Level {
	return map[Signal]Level{
		SignalVMLow:      LevelNormal,
		SignalVMMedium:   LevelSome,
		SignalVMCritical: LevelCritical,
		SignalMemHigh:    LevelSome,
		SignalMemMax:     LevelSome,
		SignalOOM:        LevelCritical,
		SignalOOMKill:    LevelCritical,
	}
}

func (c *ModelConfig) fill() {
	def := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.SomeEnter, 0.02)
	def(&c.SomeExit, 0.005)
	def(&c.FullEnter, 0.02)
	def(&c.FullExit, 0.005)
	def(&c.CriticalFull, 0.5)
	if c.Hold == 0 {
		c.Hold = 4 * time.Second
	}
	if c.MinDwell == 0 {
		c.MinDwell = time.Second
	}
	if c.Signals == nil {
		c.Signals = DefaultSignalLevels()
	}
}

// Validate reports an inconsistent configuration (after defaults are applied).
func (c ModelConfig) Validate() error {
	c.fill()
	for _, p := range []struct {
		name        string
		enter, exit float64
	}{{"some", c.SomeEnter, c.SomeExit}, {"full", c.FullEnter, c.FullExit}} {
		if !(p.exit > 0 && p.exit <= p.enter && p.enter <= 1) {
			return fmt.Errorf("pressure model: %s thresholds enter %g exit %g: need 0 < exit <= enter <= 1", p.name, p.enter, p.exit)
		}
	}
	if !(c.CriticalFull > c.FullEnter && c.CriticalFull <= 1) {
		return fmt.Errorf("pressure model: critical full share %g must lie in (full enter %g, 1]", c.CriticalFull, c.FullEnter)
	}
	if c.Hold < 0 || c.MinDwell < 0 {
		return fmt.Errorf("pressure model: negative hold %s or dwell %s", c.Hold, c.MinDwell)
	}
	return nil
}

// evidence origins: polled PSI samples can clear what polled samples asserted, but
// not what a notification asserted.
const (
	originNotify = iota
	originPoll
	numOrigins
)

// Model turns events into a [Level] with hysteresis. It is a pure state machine:
// time comes from the events and from the caller ([Model.Advance]), so it is tested
// without clocks. It is not safe for concurrent use.
//
// Rules:
//   - A PSI trigger firing (SignalSome or SignalFull, not polled) asserts Some or Full
//     for Hold or two trigger windows, whichever is longer; a full trigger whose threshold share is at least CriticalFull asserts
//     Critical.
//   - A polled sample asserts Some (Full) when its share reaches SomeEnter
//     (FullEnter), keeps it while the share stays at or above SomeExit (FullExit), and
//     withdraws it below that; a full share at or above CriticalFull asserts Critical.
//     A polled assertion lasts Hold unless a later sample withdraws it.
//   - Other signals assert the level Signals maps them to, for Hold.
//   - The level is the highest level asserted. It rises at once and falls only after
//     MinDwell in the current level.
type Model struct {
	cfg     ModelConfig
	level   Level
	entered time.Time
	// until[l][origin] is when the assertion of level l by that origin ends.
	until [numLevels][numOrigins]time.Time
	now   time.Time
}

// NewModel returns a model at LevelNormal, or an error for an invalid configuration.
func NewModel(cfg ModelConfig) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fill()
	return &Model{cfg: cfg}, nil
}

// Config returns the configuration with defaults applied.
func (m *Model) Config() ModelConfig { return m.cfg }

// Level returns the current level.
func (m *Model) Level() Level { return m.level }

// Entered returns when the current level was entered (zero before any change).
func (m *Model) Entered() time.Time { return m.entered }

func (m *Model) assert(l Level, origin int, until time.Time) {
	if l <= LevelNormal {
		return
	}
	if until.After(m.until[l][origin]) {
		m.until[l][origin] = until
	}
}

// Observe feeds one event and re-evaluates the level at ev.Time. It returns the
// level and whether it changed.
func (m *Model) Observe(ev Event) (Level, bool) {
	c := &m.cfg
	t := ev.Time
	switch ev.Signal {
	case SignalSome, SignalFull:
		if !ev.Polled {
			l := LevelSome
			if ev.Signal == SignalFull {
				l = LevelFull
				if ev.Share >= c.CriticalFull {
					l = LevelCritical
				}
			}
			// A trigger fires at most once per window while its condition lasts, so its
			// assertion never lasts less than two windows.
			m.assert(l, originNotify, t.Add(max(c.Hold, 2*ev.Window)))
			break
		}
		enter, exit, l := c.SomeEnter, c.SomeExit, LevelSome
		if ev.Signal == SignalFull {
			enter, exit, l = c.FullEnter, c.FullExit, LevelFull
			if ev.Share >= c.CriticalFull {
				m.assert(LevelCritical, originPoll, t.Add(c.Hold))
			} else {
				m.until[LevelCritical][originPoll] = time.Time{}
			}
		}
		held := m.until[l][originPoll].After(t)
		switch {
		case ev.Share >= enter, held && ev.Share >= exit:
			m.until[l][originPoll] = t.Add(c.Hold)
		default:
			m.until[l][originPoll] = time.Time{}
		}
	default:
		if l, ok := c.Signals[ev.Signal]; ok {
			m.assert(l, originNotify, t.Add(c.Hold))
		}
	}
	return m.Advance(t)
}

// target is the highest level asserted at t.
func (m *Model) target(t time.Time) Level {
	for l := LevelCritical; l > LevelNormal; l-- {
		for o := range numOrigins {
			if m.until[l][o].After(t) {
				return l
			}
		}
	}
	return LevelNormal
}

// Advance re-evaluates the level at t (assertions expire, dwell ends). It returns the
// level and whether it changed. Time never goes backwards: an earlier t is treated
// as the latest time seen.
func (m *Model) Advance(t time.Time) (Level, bool) {
	if t.Before(m.now) {
		t = m.now
	}
	m.now = t
	want := m.target(t)
	switch {
	case want > m.level:
	case want < m.level && !t.Before(m.entered.Add(m.cfg.MinDwell)):
	default:
		return m.level, false
	}
	m.level, m.entered = want, t
	return want, true
}

// Next returns the earliest time at which the level may fall without further events,
// or the zero time when it is Normal.
func (m *Model) Next() time.Time {
	if m.level == LevelNormal {
		return time.Time{}
	}
	// The current level's support ends when every assertion at or above it has expired.
	var end time.Time
	for l := m.level; l < numLevels; l++ {
		for o := range numOrigins {
			if m.until[l][o].After(end) {
				end = m.until[l][o]
			}
		}
	}
	if dwell := m.entered.Add(m.cfg.MinDwell); dwell.After(end) {
		end = dwell
	}
	return end
}

// LevelOfShares is the level that stall shares (0..1) of one interval, taken from
// the growth of a pressure file's totals, call for under cfg's thresholds (after
// defaults): Critical at a full share of CriticalFull, Full at FullEnter, Some at a
// some share of SomeEnter, else Normal. It is what [Model] would say of the interval
// from the totals alone, without hysteresis or notifications; `psiflow pressure
// watch` compares it with the model's level to report their agreement.
func LevelOfShares(some, full float64, cfg ModelConfig) Level {
	cfg.fill()
	switch {
	case full >= cfg.CriticalFull:
		return LevelCritical
	case full >= cfg.FullEnter:
		return LevelFull
	case some >= cfg.SomeEnter:
		return LevelSome
	}
	return LevelNormal
}

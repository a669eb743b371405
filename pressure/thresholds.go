package pressure

import (
	"fmt"
	"math"
	"time"
)

// ThresholdsConfig are the inputs of [ThresholdsFor].
type ThresholdsConfig struct {
	// TargetIOPS is the read rate the loader must sustain (I/Os per second).
	TargetIOPS float64
	// Safety is how many I/O intervals of stall are tolerated per window before
	// the loader reacts (default 5).
	Safety float64
	// ReclaimP99 is the 99th percentile of page-reclaim latency on the host.
	ReclaimP99 time.Duration
	// FullFactor multiplies ReclaimP99 for the full threshold (default 3).
	FullFactor float64
	// Window is the trigger window (default 2s, the shortest that needs no privilege).
	Window time.Duration
}

// ThresholdsFor derives a "some" and a "full" trigger from a target IOPS and a
// reclaim latency, with the seed document's formula and its units corrected:
//
//	some stall = Safety / TargetIOPS            (seconds; one I/O interval is 1/IOPS)
//	full stall = ReclaimP99 × FullFactor
//
// both measured within Window. The seed wrote the first as
// (1/IOPS) × safety × 1_000_000 µs and then called 50,000 IOPS × 5 "100 ms"; it is
// 100 µs.
//
// Worked example: 50,000 IOPS gives an I/O interval of 1/50,000 s = 20 µs; with
// Safety 5 the some threshold is 100 µs. A reclaim p99 of 150 ms with FullFactor 3
// gives a full threshold of 450 ms. With the unprivileged 2 s window the triggers are
//
//	some 100 2000000      (fires at 0.005% of the window stalled: the first reclaim stall)
//	full 450000 2000000   (fires at 22.5%: every task stalled for three slow reclaims)
//
// A some threshold this small makes the "some" trigger fire at the first noticeable
// stall, which is the seed's intent (slow down as soon as reclaim costs I/O time);
// raise Safety for a calmer loader. Stalls are rounded up to whole microseconds.
// The triggers are validated as unprivileged ones when Window is a multiple of 2 s,
// else as privileged ones (arm them with TriggerConfig.UserNS).
func ThresholdsFor(c ThresholdsConfig) (some, full Trigger, err error) {
	if c.Safety == 0 {
		c.Safety = 5
	}
	if c.FullFactor == 0 {
		c.FullFactor = 3
	}
	if c.Window == 0 {
		c.Window = 2 * time.Second
	}
	if !(c.TargetIOPS > 0) || math.IsInf(c.TargetIOPS, 0) {
		return Trigger{}, Trigger{}, fmt.Errorf("trigger thresholds: target IOPS %g must be positive and finite", c.TargetIOPS)
	}
	if !(c.Safety > 0) || !(c.FullFactor > 0) {
		return Trigger{}, Trigger{}, fmt.Errorf("trigger thresholds: safety %g and full factor %g must be positive", c.Safety, c.FullFactor)
	}
	if c.ReclaimP99 <= 0 {
		return Trigger{}, Trigger{}, fmt.Errorf("trigger thresholds: reclaim p99 %s must be positive", c.ReclaimP99)
	}
	// roundUS rounds up to whole microseconds, forgiving float noise below a nanosecond.
	roundUS := func(seconds float64) time.Duration {
		ns := int64(math.Ceil(seconds*1e9 - 1e-3))
		return time.Duration((ns+999)/1000) * time.Microsecond
	}
	some = Trigger{Stall: roundUS(c.Safety / c.TargetIOPS), Window: c.Window}
	full = Trigger{Full: true, Stall: roundUS(c.ReclaimP99.Seconds() * c.FullFactor), Window: c.Window}
	priv := c.Window%UnprivilegedWindowStep != 0
	for _, t := range []Trigger{some, full} {
		if err := t.Validate(priv); err != nil {
			return Trigger{}, Trigger{}, fmt.Errorf("trigger thresholds for %g IOPS, reclaim p99 %s: %w", c.TargetIOPS, c.ReclaimP99, err)
		}
	}
	return some, full, nil
}

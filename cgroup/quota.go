package cgroup

import (
	"context"
	"fmt"
	"time"
)

// CPUQuotaTarget is what a [QuotaController] reads and adjusts; *[Group] satisfies it.
type CPUQuotaTarget interface {
	CPUStat() (CPUStat, error)
	SetCPUMax(quota, period time.Duration) error
}

// QuotaConfig configures a [QuotaController]. Zero fields take the defaults named.
type QuotaConfig struct {
	// Min and Max bound the quota per period; 0 < Min ≤ Max is required.
	Min, Max time.Duration
	// Initial is the quota set when the controller starts (default Min).
	Initial time.Duration
	// Period is the enforcement period (default [DefaultCPUPeriod]).
	Period time.Duration
	// Interval is how often cpu.stat is sampled and the quota reconsidered (default 1 s).
	Interval time.Duration
	// RaiseAbove: the quota is raised when the group was throttled for more than this
	// much time per second of wall time over the last interval (default 500 ms).
	RaiseAbove time.Duration
	// IdleBelow: the quota is lowered when the group was not throttled and used less than
	// this fraction of its quota over the last interval (default 0.5). Where the host has
	// no usage counter for the group, "not throttled at all" counts as idle.
	IdleBelow float64
	// Step is the relative change per decision (default 0.10: ±10 %).
	Step float64
	// OnChange, if set, is called after every change of the quota.
	OnChange func(QuotaDecision)
}

// QuotaDecision records one change made by a [QuotaController].
type QuotaDecision struct {
	// Old and New are the quotas per period before and after.
	Old, New time.Duration
	// ThrottledPerSecond is the group's throttled time per second of wall time over the
	// interval that led to the decision.
	ThrottledPerSecond time.Duration
	// UsedFraction is the CPU time used over the interval as a fraction of what the old
	// quota allowed, or -1 when unknown.
	UsedFraction float64
	// Reason is "throttled" or "idle".
	Reason string
}

// QuotaController adapts a group's CPU quota to its demand: it raises the quota by Step
// when the group is throttled more than RaiseAbove per second, and lowers it by Step when
// the group is idle, always within [Min, Max]. It is the seed's "adaptive cpu.max"
// with its thresholds made explicit. Create one with [NewQuotaController] and call
// [QuotaController.Run].
type QuotaController struct {
	cfg    QuotaConfig
	target CPUQuotaTarget
	quota  time.Duration
}

// NewQuotaController validates cfg, applies the defaults and returns a controller for
// target.
func NewQuotaController(target CPUQuotaTarget, cfg QuotaConfig) (*QuotaController, error) {
	if cfg.Period == 0 {
		cfg.Period = DefaultCPUPeriod
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.RaiseAbove == 0 {
		cfg.RaiseAbove = 500 * time.Millisecond
	}
	if cfg.IdleBelow == 0 {
		cfg.IdleBelow = 0.5
	}
	if cfg.Step == 0 {
		cfg.Step = 0.10
	}
	if cfg.Initial == 0 {
		cfg.Initial = cfg.Min
	}
	switch {
	case cfg.Min < MinCPUQuota || cfg.Max < cfg.Min:
		return nil, fmt.Errorf("cpu quota controller: bounds [%v, %v]: want %v ≤ Min ≤ Max", cfg.Min, cfg.Max, MinCPUQuota)
	case cfg.Initial < cfg.Min || cfg.Initial > cfg.Max:
		return nil, fmt.Errorf("cpu quota controller: initial quota %v outside [%v, %v]", cfg.Initial, cfg.Min, cfg.Max)
	case cfg.Period < MinCPUPeriod || cfg.Period > MaxCPUPeriod:
		return nil, fmt.Errorf("cpu quota controller: period %v outside [%v, %v]", cfg.Period, MinCPUPeriod, MaxCPUPeriod)
	case cfg.Step <= 0 || cfg.Step >= 1:
		return nil, fmt.Errorf("cpu quota controller: step %v: want 0 < step < 1", cfg.Step)
	case cfg.IdleBelow < 0 || cfg.IdleBelow > 1:
		return nil, fmt.Errorf("cpu quota controller: idle fraction %v: want 0 ≤ f ≤ 1", cfg.IdleBelow)
	case cfg.Interval <= 0 || cfg.RaiseAbove < 0:
		return nil, fmt.Errorf("cpu quota controller: interval %v and raise threshold %v must be positive", cfg.Interval, cfg.RaiseAbove)
	}
	return &QuotaController{cfg: cfg, target: target, quota: cfg.Initial}, nil
}

// Quota returns the quota the controller last set (or will set first). It must not be
// called concurrently with Run.
func (c *QuotaController) Quota() time.Duration { return c.quota }

// Run sets the initial quota and then samples cpu.stat every Interval, adjusting the
// quota, until ctx is done (it then returns ctx.Err()) or reading or writing the cgroup
// fails.
func (c *QuotaController) Run(ctx context.Context) error {
	if err := c.target.SetCPUMax(c.quota, c.cfg.Period); err != nil {
		return fmt.Errorf("cpu quota controller: %w", err)
	}
	prev, err := c.target.CPUStat()
	if err != nil {
		return fmt.Errorf("cpu quota controller: %w", err)
	}
	last := time.Now()
	tick := time.NewTicker(c.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		cur, err := c.target.CPUStat()
		if err != nil {
			return fmt.Errorf("cpu quota controller: %w", err)
		}
		now := time.Now()
		d, changed := c.decide(prev, cur, now.Sub(last))
		prev, last = cur, now
		if !changed {
			continue
		}
		if err := c.target.SetCPUMax(d.New, c.cfg.Period); err != nil {
			return fmt.Errorf("cpu quota controller: %w", err)
		}
		c.quota = d.New
		if c.cfg.OnChange != nil {
			c.cfg.OnChange(d)
		}
	}
}

// decide returns the next quota from two cpu.stat samples taken elapsed apart.
func (c *QuotaController) decide(prev, cur CPUStat, elapsed time.Duration) (QuotaDecision, bool) {
	d := QuotaDecision{Old: c.quota, New: c.quota, UsedFraction: -1}
	if elapsed <= 0 || cur.ThrottledTime < prev.ThrottledTime || cur.Throttled < prev.Throttled {
		return d, false // no time passed, or counters went back (group re-created)
	}
	d.ThrottledPerSecond = time.Duration(float64(cur.ThrottledTime-prev.ThrottledTime) * float64(time.Second) / float64(elapsed))
	if prev.Usage >= 0 && cur.Usage >= prev.Usage {
		allowed := float64(elapsed) * float64(c.quota) / float64(c.cfg.Period)
		d.UsedFraction = float64(cur.Usage-prev.Usage) / allowed
	}
	throttled := cur.Throttled > prev.Throttled || cur.ThrottledTime > prev.ThrottledTime
	switch {
	case d.ThrottledPerSecond > c.cfg.RaiseAbove:
		d.New = min(c.cfg.Max, time.Duration(float64(c.quota)*(1+c.cfg.Step)))
		d.Reason = "throttled"
	case !throttled && (d.UsedFraction < 0 || d.UsedFraction < c.cfg.IdleBelow):
		d.New = max(c.cfg.Min, time.Duration(float64(c.quota)*(1-c.cfg.Step)))
		d.Reason = "idle"
	}
	return d, d.New != d.Old
}

package nvml

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/psiflow/psiflow/cgroup"
)

// UtilizationSource reports GPU utilisation between 0 and 1; a [*Monitor]
// is one (the mean over its devices).
type UtilizationSource interface {
	Utilization() (float64, error)
}

// FollowConfig configures [Follow]. Zero fields take the defaults named.
type FollowConfig struct {
	// Min and Max bound the quota per period; 0 < Min ≤ Max is required.
	Min, Max time.Duration
	// Period is the enforcement period (default cgroup.DefaultCPUPeriod).
	Period time.Duration
	// Interval is how often the utilisation is sampled (default 1 s).
	Interval time.Duration
	// Smoothing is the weight of the newest sample in the moving average
	// (default 0.5; 1 follows every sample).
	Smoothing float64
	// Deadband: changes smaller than this fraction of Max−Min are not made
	// (default 0.05), so the quota does not chatter.
	Deadband float64
	// OnChange, if set, is called after every change of the quota.
	OnChange func(FollowDecision)
}

// FollowDecision is one change made by [Follow].
type FollowDecision struct {
	// Old and New are the quotas per period before and after.
	Old, New time.Duration
	// Utilization is the smoothed GPU utilisation that led to it.
	Utilization float64
}

func (c *FollowConfig) defaults() error {
	if c.Period == 0 {
		c.Period = cgroup.DefaultCPUPeriod
	}
	if c.Interval == 0 {
		c.Interval = time.Second
	}
	if c.Smoothing == 0 {
		c.Smoothing = 0.5
	}
	if c.Deadband == 0 {
		c.Deadband = 0.05
	}
	switch {
	case c.Min < cgroup.MinCPUQuota || c.Max < c.Min:
		return fmt.Errorf("follow-gpu: bounds [%v, %v]: want %v ≤ Min ≤ Max", c.Min, c.Max, cgroup.MinCPUQuota)
	case c.Period < cgroup.MinCPUPeriod || c.Period > cgroup.MaxCPUPeriod:
		return fmt.Errorf("follow-gpu: period %v outside [%v, %v]", c.Period, cgroup.MinCPUPeriod, cgroup.MaxCPUPeriod)
	case c.Interval <= 0:
		return fmt.Errorf("follow-gpu: interval %v must be positive", c.Interval)
	case !(c.Smoothing > 0 && c.Smoothing <= 1):
		return fmt.Errorf("follow-gpu: smoothing %v: want 0 < s ≤ 1", c.Smoothing)
	case !(c.Deadband > 0 && c.Deadband < 1):
		return fmt.Errorf("follow-gpu: deadband %v: want 0 < d < 1", c.Deadband)
	}
	return nil
}

// Follow makes target's CPU quota follow GPU utilisation until ctx ends (it
// then returns ctx.Err()) or reading the utilisation or writing the quota
// fails: quota = Min + (Max−Min)·u, u the moving average of src's samples.
// While the GPU is busy the loader that feeds it gets CPU; while it idles
// (evaluation, checkpoints, a stalled job) the CPU goes back to the host.
// It is the seed's NVML-driven cpu.max, made continuous and smoothed.
func Follow(ctx context.Context, target cgroup.CPUQuotaTarget, src UtilizationSource, cfg FollowConfig) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	u, err := src.Utilization()
	if err != nil {
		return fmt.Errorf("follow-gpu: %w", err)
	}
	u = clamp01(u)
	quota := cfg.quotaFor(u)
	if err := target.SetCPUMax(quota, cfg.Period); err != nil {
		return fmt.Errorf("follow-gpu: %w", err)
	}
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		s, err := src.Utilization()
		if err != nil {
			return fmt.Errorf("follow-gpu: %w", err)
		}
		u = cfg.Smoothing*clamp01(s) + (1-cfg.Smoothing)*u
		next := cfg.quotaFor(u)
		if math.Abs(float64(next-quota)) < cfg.Deadband*float64(cfg.Max-cfg.Min) || next == quota {
			continue
		}
		if err := target.SetCPUMax(next, cfg.Period); err != nil {
			return fmt.Errorf("follow-gpu: %w", err)
		}
		if cfg.OnChange != nil {
			cfg.OnChange(FollowDecision{Old: quota, New: next, Utilization: u})
		}
		quota = next
	}
}

func (c *FollowConfig) quotaFor(u float64) time.Duration {
	return c.Min + time.Duration(u*float64(c.Max-c.Min))
}

func clamp01(u float64) float64 {
	if math.IsNaN(u) || u < 0 {
		return 0
	}
	return min(u, 1)
}

package cgroup

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"time"
)

// CPU bandwidth bounds the kernel accepts (kernel/sched/core.c): a period of 1 ms to
// 1 s and a quota of at least 1 ms.
const (
	MinCPUPeriod = time.Millisecond
	MaxCPUPeriod = time.Second
	MinCPUQuota  = time.Millisecond
	// DefaultCPUPeriod is the kernel's default period.
	DefaultCPUPeriod = 100 * time.Millisecond
)

// SetCPUMax limits the group to quota of CPU time per period (cpu.max on v2,
// cpu.cfs_quota_us and cpu.cfs_period_us on v1); quota 1.5 × period is one and a half
// CPUs. A quota ≤ 0 removes the limit; a period of 0 means [DefaultCPUPeriod].
func (g *Group) SetCPUMax(quota, period time.Duration) error {
	if period == 0 {
		period = DefaultCPUPeriod
	}
	if period < MinCPUPeriod || period > MaxCPUPeriod {
		return fmt.Errorf("cgroup %s: cpu period %v outside the kernel's [%v, %v]", g.name, period, MinCPUPeriod, MaxCPUPeriod)
	}
	if quota > 0 && quota < MinCPUQuota {
		return fmt.Errorf("cgroup %s: cpu quota %v below the kernel's minimum %v", g.name, quota, MinCPUQuota)
	}
	p, v2, err := g.file("cpu.max", "cpu", "cpu.cfs_quota_us")
	if err != nil {
		return err
	}
	periodUS := strconv.FormatInt(period.Microseconds(), 10)
	if v2 {
		q := "max"
		if quota > 0 {
			q = strconv.FormatInt(quota.Microseconds(), 10)
		}
		if err := writeFile(p, q+" "+periodUS); err != nil {
			return fmt.Errorf("cgroup %s: set cpu max: %w", g.name, err)
		}
		return nil
	}
	// v1: drop the quota first so that a new, shorter period never meets an old quota the
	// kernel would reject against it, then set the period, then the quota.
	q := "-1"
	if quota > 0 {
		q = strconv.FormatInt(quota.Microseconds(), 10)
	}
	for _, w := range []struct{ file, val string }{
		{p, "-1"},
		{filepath.Join(filepath.Dir(p), "cpu.cfs_period_us"), periodUS},
		{p, q},
	} {
		if err := writeFile(w.file, w.val); err != nil {
			return fmt.Errorf("cgroup %s: set cpu max: %w", g.name, err)
		}
	}
	return nil
}

// CPUMax returns the group's CPU bandwidth limit; limited is false when there is none.
func (g *Group) CPUMax() (quota, period time.Duration, limited bool, err error) {
	p, v2, err := g.file("cpu.max", "cpu", "cpu.cfs_quota_us")
	if err != nil {
		return 0, 0, false, err
	}
	s, err := readFile(p)
	if err != nil {
		return 0, 0, false, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	var qUS int64
	var pUS uint64
	if v2 {
		qUS, pUS, err = parseCPUMax(s)
	} else {
		qUS, err = strconv.ParseInt(s, 10, 64)
		if err == nil {
			var ps string
			if ps, err = readFile(filepath.Join(filepath.Dir(p), "cpu.cfs_period_us")); err == nil {
				pUS, err = strconv.ParseUint(ps, 10, 64)
			}
		}
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("cgroup %s: %s: %w", g.name, p, err)
	}
	period = time.Duration(pUS) * time.Microsecond
	if qUS < 0 {
		return 0, period, false, nil
	}
	return time.Duration(qUS) * time.Microsecond, period, true, nil
}

// CPU weight ranges: cgroup2's cpu.weight and v1's cpu.shares.
const (
	MinCPUWeight     = 1
	MaxCPUWeight     = 10000
	DefaultCPUWeight = 100
	MinCPUShares     = 2
	MaxCPUShares     = 262144
	DefaultCPUShares = 1024
)

// WeightToShares converts a cgroup2 cpu.weight (1–10000, default 100) to v1 cpu.shares
// (2–262144, default 1024) proportionally around the defaults: shares = weight × 1024 /
// 100, clamped. A group at the default weight therefore gets the default shares and
// competes evenly with untouched siblings, and ratios between groups are kept. (The
// OCI/runc formula, shares = 2 + (weight − 1) × 262142 / 9999, maps the whole ranges onto
// each other instead, so default weight 100 becomes 2597 shares and default shares 1024
// become weight 39: a group converted that way weighs 2.5× more or less than its
// untouched siblings.)
func WeightToShares(weight uint64) uint64 {
	return clamp(weight*DefaultCPUShares/DefaultCPUWeight, MinCPUShares, MaxCPUShares)
}

// SharesToWeight is the inverse of [WeightToShares]: weight = shares × 100 / 1024,
// rounded to nearest, clamped to 1–10000.
func SharesToWeight(shares uint64) uint64 {
	return clamp((shares*DefaultCPUWeight+DefaultCPUShares/2)/DefaultCPUShares, MinCPUWeight, MaxCPUWeight)
}

func clamp(v, lo, hi uint64) uint64 { return min(max(v, lo), hi) }

// SetCPUWeight sets the group's CPU weight relative to its siblings, on the cgroup2 scale
// (1–10000, default 100): cpu.weight on v2, cpu.shares (via [WeightToShares]) on v1.
func (g *Group) SetCPUWeight(weight uint64) error {
	if weight < MinCPUWeight || weight > MaxCPUWeight {
		return fmt.Errorf("cgroup %s: cpu weight %d outside [%d, %d]", g.name, weight, MinCPUWeight, MaxCPUWeight)
	}
	p, v2, err := g.file("cpu.weight", "cpu", "cpu.shares")
	if err != nil {
		return err
	}
	v := weight
	if !v2 {
		v = WeightToShares(weight)
	}
	if err := writeFile(p, strconv.FormatUint(v, 10)); err != nil {
		return fmt.Errorf("cgroup %s: set cpu weight: %w", g.name, err)
	}
	return nil
}

// CPUWeight returns the group's CPU weight on the cgroup2 scale (v1 shares converted with
// [SharesToWeight]).
func (g *Group) CPUWeight() (uint64, error) {
	p, v2, err := g.file("cpu.weight", "cpu", "cpu.shares")
	if err != nil {
		return 0, err
	}
	s, err := readFile(p)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup %s: %s: %w", g.name, p, err)
	}
	if !v2 {
		v = SharesToWeight(v)
	}
	return v, nil
}

// CPUStat is the group's CPU usage and bandwidth throttling since it was created.
type CPUStat struct {
	// Usage is the CPU time used by the group's tasks (v2 usage_usec; v1
	// cpuacct.usage), or -1 when the host has no such counter for the group.
	Usage time.Duration
	// Periods counts enforcement periods in which the group was runnable.
	Periods uint64
	// Throttled counts periods in which the group exhausted its quota.
	Throttled uint64
	// ThrottledTime is the total time the group's tasks were held back by the quota (v2
	// throttled_usec; v1 throttled_time, in nanoseconds there).
	ThrottledTime time.Duration
}

// CPUStat reads cpu.stat: the v2 file where the cpu controller is enabled for the group,
// else the v1 one (with usage from cpuacct.usage), else the v2 file's usage alone (the
// cgroup2 side of a hybrid host always has cpu.stat with usage_usec).
func (g *Group) CPUStat() (CPUStat, error) {
	var st CPUStat
	switch {
	case g.v2 != "" && exists(filepath.Join(g.v2, "cpu.max")):
		return g.readCPUStat(filepath.Join(g.v2, "cpu.stat"), true)
	case g.v1["cpu"] != "":
		st, err := g.readCPUStat(filepath.Join(g.v1["cpu"], "cpu.stat"), false)
		if err != nil {
			return st, err
		}
		st.Usage = -1
		if d := g.v1["cpuacct"]; d != "" {
			p := filepath.Join(d, "cpuacct.usage")
			ns, err := ReadInt(p)
			if err != nil {
				return st, fmt.Errorf("cgroup %s: %w", g.name, err)
			}
			st.Usage = durationOf(uint64(max(ns, 0)), time.Nanosecond)
		}
		return st, nil
	case g.v2 != "" && exists(filepath.Join(g.v2, "cpu.stat")):
		return g.readCPUStat(filepath.Join(g.v2, "cpu.stat"), true)
	}
	_, _, err := g.file("cpu.stat", "cpu", "cpu.stat")
	return st, err
}

func (g *Group) readCPUStat(p string, v2 bool) (CPUStat, error) {
	m, err := ReadKeyed(p)
	if err != nil {
		return CPUStat{}, fmt.Errorf("cgroup %s: %w", g.name, err)
	}
	return cpuStatOf(m, v2), nil
}

// cpuStatOf reads cpu.stat's counters. v2 reports microseconds (usage_usec,
// throttled_usec); v1 reports throttled_time in nanoseconds and no usage (Usage is
// then -1).
func cpuStatOf(m map[string]uint64, v2 bool) CPUStat {
	st := CPUStat{Usage: -1, Periods: m["nr_periods"], Throttled: m["nr_throttled"]}
	if v2 {
		if u, ok := m["usage_usec"]; ok {
			st.Usage = durationOf(u, time.Microsecond)
		}
		st.ThrottledTime = durationOf(m["throttled_usec"], time.Microsecond)
	} else {
		st.ThrottledTime = durationOf(m["throttled_time"], time.Nanosecond)
	}
	return st
}

// durationOf converts a counter in unit to a Duration, saturating instead of wrapping.
func durationOf(v uint64, unit time.Duration) time.Duration {
	if v > uint64(math.MaxInt64/int64(unit)) {
		return math.MaxInt64
	}
	return time.Duration(v) * unit
}

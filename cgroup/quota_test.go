package cgroup

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeCPU simulates a group's cpu.stat from a CPU demand (in CPUs) under its quota,
// integrating over the bubble's fake clock.
type fakeCPU struct {
	mu             sync.Mutex
	demand         float64
	quota, period  time.Duration
	last           time.Time
	st             CPUStat
	sets           int
	failStat, fail error
}

func (f *fakeCPU) advance() {
	now := time.Now()
	if !f.last.IsZero() && f.period > 0 {
		dt := now.Sub(f.last)
		capacity := float64(f.quota) / float64(f.period)
		used := min(f.demand, capacity)
		f.st.Usage += time.Duration(used * float64(dt))
		periods := uint64(dt / f.period)
		f.st.Periods += periods
		if f.demand > capacity {
			f.st.Throttled += periods
			f.st.ThrottledTime += time.Duration(min(1, f.demand-capacity) * float64(dt))
		}
	}
	f.last = now
}

func (f *fakeCPU) CPUStat() (CPUStat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance()
	return f.st, f.failStat
}

func (f *fakeCPU) SetCPUMax(q, p time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.advance()
	f.quota, f.period = q, p
	f.sets++
	return nil
}

func (f *fakeCPU) setDemand(d float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance()
	f.demand = d
}

func TestQuotaControllerAdapts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCPU{demand: 3}
		var mu sync.Mutex
		var decisions []QuotaDecision
		c, err := NewQuotaController(f, QuotaConfig{
			Min: 50 * time.Millisecond, Max: 200 * time.Millisecond, Initial: 100 * time.Millisecond,
			OnChange: func(d QuotaDecision) { mu.Lock(); decisions = append(decisions, d); mu.Unlock() },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()

		// Demand 3 CPUs: throttled 1 s per second: +10 % a second up to Max.
		// 100 → 110 → 121 → 133.1 → 146.41 → 161.05 → 177.16 → 194.87 → 200: 8 raises.
		time.Sleep(12*time.Second + time.Millisecond)
		mu.Lock()
		n := len(decisions)
		if n != 8 {
			t.Fatalf("after 12 s at demand 3: %d decisions %+v; want 8 raises", n, decisions)
		}
		for i, d := range decisions {
			if d.Reason != "throttled" || d.New <= d.Old || d.New > 200*time.Millisecond {
				t.Errorf("decision %d = %+v; want a raise within Max", i, d)
			}
		}
		if last := decisions[n-1]; last.New != 200*time.Millisecond {
			t.Errorf("quota after raises = %v, want Max 200ms", last.New)
		}
		mu.Unlock()

		// Demand 0.1 CPU against 2 CPUs allowed: idle, -10 % a second down to Min:
		// 200 → 180 → 162 → 145.8 → 131.22 → 118.1 → 106.29 → 95.66 → 86.09 → 77.48 →
		// 69.74 → 62.76 → 56.49 → 50.84 → 50: 14 cuts. Demand stays below the quota all the way.
		f.setDemand(0.1)
		time.Sleep(20 * time.Second)
		mu.Lock()
		lowers := decisions[8:]
		if len(lowers) != 14 {
			t.Errorf("after 20 s at demand 0.1: %d cuts %+v; want 14", len(lowers), lowers)
		}
		for _, d := range lowers {
			if d.Reason != "idle" || d.New >= d.Old || d.New < 50*time.Millisecond || d.UsedFraction >= 0.5 {
				t.Errorf("decision %+v; want an idle cut within Min", d)
			}
		}
		if len(lowers) > 0 && lowers[len(lowers)-1].New != 50*time.Millisecond {
			t.Errorf("quota after cuts = %v, want Min", lowers[len(lowers)-1].New)
		}
		mu.Unlock()

		// Demand just under the quota: neither throttled nor idle, no change.
		f.setDemand(0.04)
		before := len(decisions)
		time.Sleep(5 * time.Second)
		mu.Lock()
		if len(decisions) != before {
			t.Errorf("steady demand changed the quota: %+v", decisions[before:])
		}
		mu.Unlock()

		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	})
}

func TestQuotaControllerErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCPU{fail: errors.New("no cpu controller")}
		c, err := NewQuotaController(f, QuotaConfig{Min: time.Millisecond * 10, Max: time.Millisecond * 20})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Run(t.Context()); err == nil || !errors.Is(err, f.fail) {
			t.Errorf("Run with a failing target = %v", err)
		}
	})
}

func TestQuotaConfigValidation(t *testing.T) {
	ms := time.Millisecond
	for _, cfg := range []QuotaConfig{
		{},
		{Min: 20 * ms, Max: 10 * ms},
		{Min: 10 * ms, Max: 20 * ms, Initial: 30 * ms},
		{Min: 10 * ms, Max: 20 * ms, Step: 1.5},
		{Min: 10 * ms, Max: 20 * ms, Period: 2 * time.Second},
		{Min: 10 * ms, Max: 20 * ms, IdleBelow: 2},
	} {
		if _, err := NewQuotaController(&fakeCPU{}, cfg); err == nil {
			t.Errorf("NewQuotaController(%+v) accepted", cfg)
		}
	}
}

func TestQuotaDecide(t *testing.T) {
	c, err := NewQuotaController(&fakeCPU{}, QuotaConfig{Min: 50 * time.Millisecond, Max: 200 * time.Millisecond, Initial: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := time.Second
	tests := []struct {
		name      string
		prev, cur CPUStat
		elapsed   time.Duration
		want      time.Duration
		changed   bool
	}{
		{"throttled 600ms/s raises", CPUStat{}, CPUStat{Usage: s, Throttled: 10, ThrottledTime: 600 * time.Millisecond}, s, 110 * time.Millisecond, true},
		{"throttled 500ms/s holds", CPUStat{}, CPUStat{Usage: s, Throttled: 10, ThrottledTime: 500 * time.Millisecond}, s, 100 * time.Millisecond, false},
		{"throttled 0.9s over 2s holds", CPUStat{}, CPUStat{Usage: 2 * s, Throttled: 3, ThrottledTime: 900 * time.Millisecond}, 2 * s, 100 * time.Millisecond, false},
		{"throttled 1.3s over 2s raises", CPUStat{}, CPUStat{Usage: 2 * s, Throttled: 3, ThrottledTime: 1300 * time.Millisecond}, 2 * s, 110 * time.Millisecond, true},
		{"idle lowers", CPUStat{Usage: s}, CPUStat{Usage: s + 100*time.Millisecond}, s, 90 * time.Millisecond, true},
		{"busy unthrottled holds", CPUStat{}, CPUStat{Usage: 800 * time.Millisecond}, s, 100 * time.Millisecond, false},
		{"usage unknown, no throttling: idle", CPUStat{Usage: -1}, CPUStat{Usage: -1}, s, 90 * time.Millisecond, true},
		{"counters reset: hold", CPUStat{Throttled: 5, ThrottledTime: s}, CPUStat{}, s, 100 * time.Millisecond, false},
		{"no time: hold", CPUStat{}, CPUStat{ThrottledTime: s}, 0, 100 * time.Millisecond, false},
	}
	for _, tc := range tests {
		d, changed := c.decide(tc.prev, tc.cur, tc.elapsed)
		if d.New != tc.want || changed != tc.changed {
			t.Errorf("%s: decide = %+v, %v; want %v, %v", tc.name, d, changed, tc.want, tc.changed)
		}
	}
}

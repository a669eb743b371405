package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pressure"
)

// TestFloorFlags: the image front-ends pause below the floor by default, for at
// most 10 minutes; -pause-timeout 0 waits without end; -pause-timeout with another
// policy and an unknown policy are usage errors (psiflow serve, which the Python
// loader starts, shares the flags with demo and psiflow-imagefolder).
func TestFloorFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		policy  memory.FloorPolicy
		timeout time.Duration
		err     string
	}{
		{name: "default", policy: memory.PauseBelowFloor, timeout: pause.DefaultTimeout},
		{name: "timeout", args: []string{"-pause-timeout", "90s"}, policy: memory.PauseBelowFloor, timeout: 90 * time.Second},
		{name: "forever", args: []string{"-pause-timeout", "0"}, policy: memory.PauseBelowFloor, timeout: pause.Forever},
		{name: "stop", args: []string{"-below-floor", "stop"}, policy: memory.StopBelowFloor, timeout: pause.DefaultTimeout},
		{name: "run", args: []string{"-below-floor", "run"}, policy: memory.RunAtFloor, timeout: pause.DefaultTimeout},
		{name: "timeout with run", args: []string{"-below-floor", "run", "-pause-timeout", "1m"}, err: "-pause-timeout needs -below-floor pause, not run"},
		{name: "unknown", args: []string{"-below-floor", "sleep"}, err: `flag -below-floor`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseServe(append([]string{"-socket", "s", "-data", "d"}, tt.args...))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, errUsage) {
					t.Fatalf("error %v; want a usage error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r := c.p.Resource; r.BelowFloor != tt.policy || r.PauseTimeout != tt.timeout {
				t.Fatalf("policy %q timeout %v; want %q, %v", r.BelowFloor, r.PauseTimeout, tt.policy, tt.timeout)
			}
		})
	}
}

// TestRuntimeReportPauses: the runtime report that ends psiflow demo -data and
// psiflow run says how often and how long the loader paused below its floor, and
// says nothing of pauses when there were none.
func TestRuntimeReportPauses(t *testing.T) {
	const mib = 1 << 20
	for _, tt := range []struct {
		name   string
		others int64
		want   string
	}{
		{name: "paused", others: 230 * mib, want: "Memory: paused 1× below the floor, "},
		{name: "room", others: 10 * mib},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// 256 MiB − others − 16 MiB reserve against a 40 MiB floor, from New's
			// first sample.
			read := func() (pressure.MemorySample, error) {
				return pressure.MemorySample{At: time.Now(), Limit: 256 * mib, Limited: true, Unreclaimable: tt.others + 10*mib, Self: 10 * mib}, nil
			}
			rt, err := memory.New(memory.Config{Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 1, ReadRegistered: -1,
				Headroom: pressure.HeadroomConfig{Read: read, Reserve: 16 * mib}})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			var b strings.Builder
			printRuntimeReport(&b, rt)
			got := b.String()
			if tt.want == "" && strings.Contains(got, "paused") || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("report %q; want %q in it", got, tt.want)
			}
		})
	}
}

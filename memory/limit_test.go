package memory

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/pressure"
)

// TestLimitBelowFloorIsRefusedAtStart: a memory limit that cannot hold the floor
// even with nothing else in the cgroup is refused by New, naming the limit, the
// reserve, the floor and the limit that would do; a limit that holds it, no
// limit, Fixed mode and RunAtFloor start.
func TestLimitBelowFloorIsRefusedAtStart(t *testing.T) {
	for _, tt := range []struct {
		name    string
		limit   int64
		limited bool
		reserve int64 // Headroom.Reserve (0: the default)
		mode    Mode
		policy  FloorPolicy
		need    int64 // 0: starts
		floor   int64 // 0: 30 MiB
	}{
		// floor 30 + margin 4 + reserve 8 = 42 MiB
		{name: "4MiB", limit: 4 * mib, limited: true, need: 42 * mib},
		{name: "24MiB", limit: 24 * mib, limited: true, need: 42 * mib},
		{name: "floor-but-no-margin", limit: 39 * mib, limited: true, need: 42 * mib},
		{name: "just-below", limit: 42*mib - 1, limited: true, need: 42 * mib},
		{name: "just-enough", limit: 42 * mib, limited: true},
		{name: "others-do-not-count", limit: 64 * mib, limited: true},
		{name: "stop-policy", limit: 24 * mib, limited: true, policy: StopBelowFloor, need: 42 * mib},
		{name: "explicit-reserve", limit: 40 * mib, limited: true, reserve: 16 * mib, need: 50 * mib},
		// above 128 MiB the default reserve is limit/16: 15/16 of 160 MiB = 150 MiB
		{name: "reserve-a-sixteenth", limit: 150 * mib, limited: true, floor: 146 * mib, need: 160 * mib},
		// from 1 GiB up the default reserve is 64 MiB (pressure.DefaultReserve):
		// floor 1000 + margin 4 + 64 = 1068 MiB, where a sixteenth would ask 1071
		{name: "reserve-capped", limit: 1060 * mib, limited: true, floor: 1000 * mib, need: 1068 * mib},
		{name: "reserve-capped-enough", limit: 1068 * mib, limited: true, floor: 1000 * mib},
		{name: "run-at-floor", limit: 24 * mib, limited: true, policy: RunAtFloor},
		{name: "fixed-mode", limit: 24 * mib, limited: true, mode: Fixed},
		{name: "no-limit", limit: 24 * mib},
	} {
		t.Run(tt.name, func(t *testing.T) {
			read := func() (pressure.MemorySample, error) {
				// Others hold much: the check is on the limit alone, not on the
				// others' memory (a pause can wait for that).
				return pressure.MemorySample{At: time.Now(), Limit: tt.limit, Limited: tt.limited, Source: "memory.limit_in_bytes of test",
					Unreclaimable: 4*mib + tt.limit/2, Self: 4 * mib}, nil
			}
			floor := tt.floor
			if floor == 0 {
				floor = 30 * mib
			}
			mode := tt.mode
			if mode == "" {
				mode = Elastic
			}
			cfg := Config{Mode: mode, Workers: 1, BelowFloor: tt.policy, ReadRegistered: -1,
				Headroom: pressure.HeadroomConfig{Read: read, Reserve: tt.reserve}}
			if mode == Elastic {
				cfg.Floor, cfg.BudgetFloor, cfg.MaxBudget = floor, 2*mib, 4*mib
			} else {
				cfg.MaxBudget = 4 * mib
			}
			rt, err := New(cfg)
			if tt.need == 0 {
				if err != nil {
					t.Fatalf("New: %v, want a start", err)
				}
				if err := rt.Close(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				rt.Close()
				t.Fatal("New started under a limit that cannot hold the floor")
			}
			var le *LimitBelowFloorError
			if !errors.As(err, &le) || !errors.Is(err, ErrBelowFloor) {
				t.Fatalf("New: %v, want a LimitBelowFloorError", err)
			}
			if le.Need != tt.need || le.Floor != floor || le.Sample.Limit != tt.limit {
				t.Fatalf("need %d, floor %d, limit %d: want %d, %d, %d", le.Need, le.Floor, le.Sample.Limit, tt.need, floor, tt.limit)
			}
			for _, want := range []string{"memory limit of", "memory.limit_in_bytes of test", "floor of " + bytesize.Human(floor), "at least " + bytesize.Human(tt.need)} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("message %q: want %q", err, want)
				}
			}
		})
	}
}

// TestBelowFloorErrorSaysWhatWasShort: a pause that timed out with the floor
// left but not its resume point says so; one below the floor says that.
func TestBelowFloorErrorSaysWhatWasShort(t *testing.T) {
	rep := func(current int64) pressure.HeadroomReport {
		return pressure.HeadroomReport{MemorySample: pressure.MemorySample{Limit: 2 << 30, Limited: true, Source: "memory.limit_in_bytes of test",
			Unreclaimable: 2<<30 - 128*mib - current}, Current: current, Reserve: 128 * mib}
	}
	for _, tt := range []struct {
		name    string
		e       BelowFloorError
		want    string
		notWant string
	}{
		{"short of the resume point", BelowFloorError{Report: rep(40*mib + 200<<10), Floor: 39*mib + 100<<10, Paused: 11 * time.Minute, PauseTimeout: 10 * time.Minute, ResumeAt: 48*mib + 900<<10},
			"leaves the loader 40.2 MiB (limit 2 GiB − others 1.8 GiB − reserve 128 MiB), above its floor of 39.1 MiB but short of the 48.9 MiB it resumes at", "below its floor"},
		{"below the floor", BelowFloorError{Report: rep(30 * mib), Floor: 39*mib + 100<<10, Paused: 11 * time.Minute, PauseTimeout: 10 * time.Minute, ResumeAt: 48*mib + 900<<10},
			"leaves the loader 30 MiB (limit 2 GiB − others 1.8 GiB − reserve 128 MiB), below its floor of 39.1 MiB", "short of"},
		{"stopped at once", BelowFloorError{Report: rep(30 * mib), Floor: 39*mib + 100<<10},
			"stopped: the cgroup (memory.limit_in_bytes of test) leaves the loader 30 MiB", "short of"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if m := tt.e.Error(); !strings.Contains(m, tt.want) || strings.Contains(m, tt.notWant) {
				t.Errorf("message %q: want %q, not %q", m, tt.want, tt.notWant)
			}
		})
	}
}

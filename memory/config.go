package memory

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pressure"
)

// Mode says how a loader treats its memory.
type Mode string

const (
	// Elastic: the budget follows the headroom, read buffers are sized to the reads
	// in flight, and the shed actions give memory back under pressure.
	Elastic Mode = "elastic"
	// Fixed: a 64 MiB registered read pool, a budget of a quarter of the memory limit
	// (or the one given), no headroom and no shedding: psiflow before it yielded to a co-tenant.
	Fixed Mode = "fixed"
)

// ParseMode parses "elastic" or "fixed".
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case Elastic, Fixed:
		return Mode(s), nil
	}
	return "", fmt.Errorf("memory mode %q: want elastic or fixed", s)
}

// FixedReadPool is the registered read pool of [Fixed] mode.
const FixedReadPool = 64 << 20

// ElasticReadPool is the largest registered read pool of [Elastic] mode by
// default (the budget floor where that is less): registered memory is pinned and
// charged until the epoch's rings close, a pause included, so it is part of what a
// paused loader cannot give back. Reads beyond it go to the spill pool. Measured:
// with the budget floor (24 MiB for the mixed JPEGs of the co-tenant benchmarks)
// registered, the pinned pool was nearly all of a paused launcher's anonymous
// memory.
const ElasticReadPool = 4 << 20

// WorkerSlack is how many elements beyond the decode workers a [Workers] limiter
// admits at Normal, so that a worker finds its next element queued; under pressure
// the slack goes and the limit is the number of workers allowed to decode.
const WorkerSlack = 2

// HeadroomInterval is how often the Elastic runtime samples the headroom by
// default: a co-tenant ramping at 40 MiB/s moves 4 MiB between two samples.
const HeadroomInterval = 100 * time.Millisecond

// FullPermits is the pressure gate's limit at Full in Elastic mode (reads in
// flight): the byte budget at its floor and one decode worker bound the memory, and
// the loader runs at its floor instead of stopping.
const FullPermits = 4

// goHeapBase is the Go heap allowed beside the budget in Elastic mode.
const goHeapBase = 32 << 20

// Config configures a [Runtime].
type Config struct {
	// Mode is Elastic (the default) or Fixed.
	Mode Mode
	// Pressure gates the sources on the cgroup's memory pressure: the pressure
	// gate, driven by a monitor from the first graph until Runtime.Close.
	Pressure bool
	// Floor is the loader's smallest working set that still makes progress, and
	// BudgetFloor the part of it in the byte budget (Elastic; see
	// [pressure.HeadroomConfig]). Required in Elastic mode.
	Floor, BudgetFloor int64
	// MaxBudget is the largest byte budget (Elastic, required), or the budget
	// (Fixed; 0: a quarter of the memory limit).
	MaxBudget int64
	// Workers is the number of decode workers at Normal; 0 means GOMAXPROCS
	// (what decode.Images runs).
	Workers int
	// ReadRegistered is the size of the read pool registered with the rings:
	// default the smaller of BudgetFloor and [ElasticReadPool] in Elastic mode,
	// FixedReadPool in Fixed mode; negative
	// turns UMA read buffers off (package source's own pool).
	ReadRegistered int64
	// Registerer receives the psiflow_shed_action_*, psiflow_elastic_*,
	// psiflow_uma_* and (with Pressure) psiflow_pressure_* metrics.
	Registerer prometheus.Registerer
	// Info receives one line per choice at start and per floor crossing.
	Info func(string)
	// Gate configures the pressure gate and its monitor (Pressure).
	Gate GateConfig
	// Headroom's Read, Reserve, Lookahead and Interval are used in Elastic mode;
	// Floor, BudgetFloor and Max come from the fields above.
	Headroom pressure.HeadroomConfig
	// BelowFloor is what the loader does when the cgroup leaves it less than Floor
	// (Elastic): [PauseBelowFloor] (the default), [StopBelowFloor] or [RunAtFloor].
	BelowFloor FloorPolicy
	// PauseTimeout ends a pause below the floor that lasted longer with a
	// [*BelowFloorError] (PauseBelowFloor): 0 is [pause.DefaultTimeout] (10
	// minutes), [pause.Forever] (any negative value) never.
	PauseTimeout time.Duration
	// OnPause, if set, is told of every pause, resume and pause timeout, after
	// Info has its line (from the headroom sampler's goroutine; it must not block).
	OnPause func(pause.Event)
	// Process are the actions on the whole process (Elastic): off unless asked
	// for, since a library must not change the program it runs in; the launcher
	// turns them all on ([LauncherProcess]).
	Process ProcessActions
	// NoRoom is what a paused loader does when the others in its cgroup alone
	// leave it less than its own paused resident set and NoRoomMargin
	// ([PauseBelowFloor]): [LeaveNoRoom] (the default) ends the run with a
	// [*NoRoomError], [StayNoRoom] stays paused.
	NoRoom NoRoomPolicy
	// NoRoomMargin is the room, beside the two resident sets, that the
	// co-tenant's and the loader's code need to keep running (NoRoom): 0 is
	// max([MinNoRoomMargin], limit/64).
	NoRoomMargin int64
}

// ProcessActions are what an Elastic runtime may do to the whole process, each
// measured to help a loader beside its trainer.
type ProcessActions struct {
	// GoMemoryLimit makes debug.SetMemoryLimit follow the budget and the
	// allowance (restored on Close).
	GoMemoryLimit bool
	// OOMVictim makes the loader the OOM killer's first choice in its cgroup
	// ([PreferOOMVictim]): measured here, a co-tenant at 85% of the limit was
	// killed 3 times in 5 without it, 0 in 5 with it.
	OOMVictim bool
	// LockText locks the program's code as it is faulted in ([LockProgramText])
	// so the monitor keeps running while the cgroup reclaims.
	LockText bool
}

// LauncherProcess is every process action on: what the psiflow launcher uses.
func LauncherProcess() ProcessActions {
	return ProcessActions{GoMemoryLimit: true, OOMVictim: true, LockText: true}
}

// Validate names the first field that cannot work.
func (c Config) Validate() error {
	switch c.Mode {
	case "", Elastic:
		if c.Floor <= 0 || c.BudgetFloor <= 0 || c.BudgetFloor > c.Floor {
			return fmt.Errorf("memory: floor %d and budget floor %d bytes: need 0 < budget floor ≤ floor", c.Floor, c.BudgetFloor)
		}
		if c.MaxBudget < c.BudgetFloor {
			return fmt.Errorf("memory: max budget %d bytes is below the budget floor %d", c.MaxBudget, c.BudgetFloor)
		}
	case Fixed:
		if c.MaxBudget < 0 {
			return fmt.Errorf("memory: budget %d bytes: must be 0 (a quarter of the limit) or more", c.MaxBudget)
		}
	default:
		return fmt.Errorf("memory: mode %q: want elastic or fixed", c.Mode)
	}
	if c.Workers < 0 {
		return fmt.Errorf("memory: workers %d: must be 0 (GOMAXPROCS) or more", c.Workers)
	}
	if c.BelowFloor != "" {
		if _, err := ParseFloorPolicy(string(c.BelowFloor)); err != nil {
			return fmt.Errorf("memory: %w", err)
		}
	}
	if c.NoRoom != "" {
		if _, err := ParseNoRoomPolicy(string(c.NoRoom)); err != nil {
			return fmt.Errorf("memory: %w", err)
		}
	}
	if c.NoRoomMargin < 0 {
		return fmt.Errorf("memory: no-room margin %d bytes: must not be negative", c.NoRoomMargin)
	}
	if c.PauseTimeout != 0 && c.BelowFloor != "" && c.BelowFloor != PauseBelowFloor {
		return fmt.Errorf("memory: a pause timeout (%v) with below-floor policy %s: it is for %s", c.PauseTimeout, c.BelowFloor, PauseBelowFloor)
	}
	return nil
}

package pressure

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/psiflow/psiflow/cgroup"
)

// DefaultTriggers are armed by [Open] when none are given: "some 100000 2000000"
// and "full 100000 2000000" (100 ms of stall within 2 s, i.e. 5%; a 2 s window needs
// no privilege).
var DefaultTriggers = []Trigger{
	{Stall: 100 * time.Millisecond, Window: 2 * time.Second},
	{Full: true, Stall: 100 * time.Millisecond, Window: 2 * time.Second},
}

// OpenConfig configures [Open].
type OpenConfig struct {
	// Group is the cgroup to watch; nil means the calling process's own
	// (cgroup.Self), falling back to system-wide PSI where it has no pressure file.
	Group *cgroup.Group
	// Triggers to arm (default DefaultTriggers). Windows that need CAP_SYS_RESOURCE
	// are armed through the user-namespace helper where [ProbeShortWindows] says it
	// works; where it does not, triggers are rejected with that reason and Open falls
	// back to the next source.
	Triggers []Trigger
	// PollInterval is the polling fallback's interval (default 1s, at least MinPollInterval).
	PollInterval time.Duration
	// MemoryEventsInterval is how often the group's memory event counters are read
	// (default 250ms); negative disables that source.
	MemoryEventsInterval time.Duration
	// DisableTriggers and DisableVMPressure skip those sources (to test fallbacks).
	DisableTriggers, DisableVMPressure bool
	// BackstopInterval is how often the stall totals of the pressure file are also
	// polled beside triggers or vmpressure (default 500ms, at least
	// MinPollInterval; negative: no backstop). A trigger fires at most once per
	// window and vmpressure says nothing about full stalls; the polled shares let the
	// model reach Full and Critical when the whole group stalls.
	BackstopInterval time.Duration
}

// BackstopMinShare is the stalled share of a backstop sample below which it is
// dropped. It is 0: every sample reaches the model, whose enter and exit thresholds
// decide, so the level follows the pressure file's totals interval by interval
// (measured with `psiflow pressure watch`: with 0.10, a cgroup stalled 3% of every
// second was reported at Full 55% of the time and Some the rest, agreeing with the
// totals in 55% of the intervals; with 0, in 100%).
const BackstopMinShare = 0.0

// Opened says what [Open] chose.
type Opened struct {
	// Source delivers the events of every source opened, merged.
	Source Source
	// Kind is the primary source: "psi-trigger", "vmpressure" or "psi-poll".
	Kind string
	// Rejected gives, for each better source not used, the reason.
	Rejected []string
	// Backstop reports that the stall totals are polled beside the primary source.
	Backstop bool
}

// Open opens the best pressure source the host allows for a cgroup: PSI triggers on
// its memory.pressure; else cgroup v1 vmpressure on its memory cgroup; else a poller
// on stall totals, whose description carries the reasons the others failed. Where the
// group's memory event counters can be read, a memory-events source is merged in
// (OOM kills, limit hits). All sources end when ctx is cancelled.
func Open(ctx context.Context, cfg OpenConfig) (*Opened, error) {
	g := cfg.Group
	if g == nil {
		if self, err := cgroup.Self(); err == nil {
			g = self
		}
	}
	var path, why string
	if g != nil {
		p, err := g.PressurePath("memory")
		if err == nil {
			path, why = p, "cgroup "+g.Name()
		} else {
			why = err.Error()
		}
	}
	if path == "" {
		if g != nil && cfg.Group != nil {
			return nil, fmt.Errorf("open pressure sources for cgroup %s: %s", g.Name(), why)
		}
		path = SystemPressurePath("memory")
	}
	trigs := cfg.Triggers
	if len(trigs) == 0 {
		trigs = DefaultTriggers
	}
	out := &Opened{}
	var primary Source
	if cfg.DisableTriggers {
		out.Rejected = append(out.Rejected, "psi-trigger: disabled")
	} else {
		userNS, refused := false, ""
		if priv, _ := HasCapSysResource(); !priv {
			for _, t := range trigs {
				if t.Validate(false) != nil && t.Validate(true) == nil {
					ok, reason := ProbeShortWindows(ctx, path)
					if !ok {
						refused = fmt.Sprintf("psi-trigger: trigger %q needs CAP_SYS_RESOURCE and the user-namespace helper does not work here: %s", t, reason)
					}
					userNS = true
					break
				}
			}
		}
		if refused != "" {
			out.Rejected = append(out.Rejected, refused)
		} else if src, err := OpenTriggers(ctx, TriggerConfig{Path: path, Triggers: trigs, UserNS: userNS}); err == nil {
			primary, out.Kind = src, "psi-trigger"
		} else {
			out.Rejected = append(out.Rejected, "psi-trigger: "+err.Error())
		}
	}
	if primary == nil {
		if cfg.DisableVMPressure {
			out.Rejected = append(out.Rejected, "vmpressure: disabled")
		} else {
			dir := ""
			var err error
			if g != nil {
				dir, err = g.V1Dir("memory")
			} else {
				dir, err = SelfMemoryV1Dir()
			}
			if err == nil {
				var src Source
				src, err = OpenVMPressure(ctx, VMPressureConfig{Dir: dir})
				if err == nil {
					primary, out.Kind = src, "vmpressure"
				}
			}
			if err != nil {
				out.Rejected = append(out.Rejected, "vmpressure: "+err.Error())
			}
		}
	}
	if primary == nil {
		reason := ""
		for i, r := range out.Rejected {
			if i > 0 {
				reason += "; "
			}
			reason += r
		}
		src, err := OpenPoller(ctx, PollerConfig{Path: path, Interval: cfg.PollInterval, Reason: reason})
		if err != nil {
			return nil, fmt.Errorf("open pressure sources (%s): %w", reason, err)
		}
		primary, out.Kind = src, "psi-poll"
	}
	sources := []Source{primary}
	if out.Kind != "psi-poll" && cfg.BackstopInterval >= 0 {
		iv := cfg.BackstopInterval
		if iv == 0 {
			iv = 500 * time.Millisecond
		}
		if src, err := OpenPoller(ctx, PollerConfig{Path: path, Interval: iv, MinShare: BackstopMinShare, Reason: "backstop beside " + out.Kind}); err == nil {
			sources = append(sources, src)
			out.Backstop = true
		} else if !errors.Is(err, context.Canceled) {
			out.Rejected = append(out.Rejected, "psi-poll backstop: "+err.Error())
		}
	}
	if g != nil && cfg.MemoryEventsInterval >= 0 {
		read := func() (MemoryCounts, error) {
			ev, err := g.MemoryEvents()
			if err != nil {
				return MemoryCounts{}, err
			}
			return MemoryCounts{High: ev.High, Max: ev.Max, OOM: ev.OOM, OOMKill: ev.OOMKill}, nil
		}
		if src, err := OpenMemoryEvents(ctx, MemoryEventsConfig{Name: g.Name(), Read: read, Interval: cfg.MemoryEventsInterval}); err == nil {
			sources = append(sources, src)
		} else if !errors.Is(err, context.Canceled) {
			out.Rejected = append(out.Rejected, "memory-events: "+err.Error())
		}
	}
	if len(sources) == 1 {
		out.Source = primary
	} else {
		out.Source = Merge(ctx, sources...)
	}
	return out, nil
}

package pressure

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MinPollInterval is the shortest interval [OpenPoller] accepts: reading a cgroup's
// pressure file every few milliseconds stops its triggers from firing.
const MinPollInterval = 100 * time.Millisecond

// PollerConfig configures [OpenPoller].
type PollerConfig struct {
	// Path is the PSI file to sample (default: [SelfPressurePath]("memory")).
	Path string
	// Interval between samples; at least MinPollInterval (default 1s).
	Interval time.Duration
	// Reason says why the poller is used instead of triggers; it becomes part of Describe.
	Reason string
	// Buffer is the capacity of the events channel (default 16).
	Buffer int
	// MinShare drops samples whose stalled share is below it (0: deliver all). A
	// backstop beside triggers sets it so that only heavy stalls assert a level;
	// the model then lets the level expire after its Hold.
	MinShare float64
}

// OpenPoller samples a PSI file's stall totals every Interval and delivers, per sample,
// a SignalSome event (and a SignalFull event where the file has a "full" line) whose
// Share is the stalled fraction of the elapsed interval and whose Polled flag is set.
// It is the fallback when neither triggers nor vmpressure work. An interval below
// [MinPollInterval] is refused. The source ends with nil when ctx is cancelled and
// with an error when the file cannot be read.
func OpenPoller(ctx context.Context, cfg PollerConfig) (Source, error) {
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.Interval < MinPollInterval {
		return nil, fmt.Errorf("psi poller: interval %s is below %s (reading a pressure file more often stops its triggers)", cfg.Interval, MinPollInterval)
	}
	if cfg.Path == "" {
		cfg.Path, _ = SelfPressurePath("memory")
	}
	first, err := ReadPSI(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("psi poller: %w", err)
	}
	if !(cfg.MinShare >= 0 && cfg.MinShare <= 1) {
		return nil, fmt.Errorf("psi poller: min share %v outside [0, 1]", cfg.MinShare)
	}
	s := &pollSource{path: cfg.Path, interval: cfg.Interval, minShare: cfg.MinShare}
	s.desc = fmt.Sprintf("psi poller every %s on %s", cfg.Interval, cfg.Path)
	if cfg.Reason != "" {
		s.desc += " (" + cfg.Reason + ")"
	}
	buf := cfg.Buffer
	if buf <= 0 {
		buf = 16
	}
	s.events = make(chan Event, buf)
	go func() {
		s.err = s.loop(ctx, first, time.Now())
		close(s.events)
	}()
	return s, nil
}

type pollSource struct {
	path     string
	desc     string
	interval time.Duration
	minShare float64
	events   chan Event
	err      error
}

func (s *pollSource) Events() <-chan Event { return s.events }
func (s *pollSource) Err() error           { return s.err }
func (s *pollSource) Describe() string     { return s.desc }

func (s *pollSource) loop(ctx context.Context, prev PSI, prevAt time.Time) error {
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		cur, err := ReadPSI(s.path)
		if err != nil {
			if errors.Is(err, ErrNoPSI) {
				return fmt.Errorf("psi poller: pressure file gone (cgroup removed?): %w", err)
			}
			return fmt.Errorf("psi poller: %w", err)
		}
		now := time.Now()
		elapsed := now.Sub(prevAt)
		evs := []Event{{Time: now, Source: "psi-poll " + s.path, Signal: SignalSome, Share: stallShare(prev.Some.Total, cur.Some.Total, elapsed), Window: elapsed, Count: 1, Polled: true}}
		if cur.HasFull {
			evs = append(evs, Event{Time: now, Source: "psi-poll " + s.path, Signal: SignalFull, Share: stallShare(prev.Full.Total, cur.Full.Total, elapsed), Window: elapsed, Count: 1, Polled: true})
		}
		prev, prevAt = cur, now
		for _, ev := range evs {
			if ev.Share < s.minShare {
				continue
			}
			select {
			case s.events <- ev:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// stallShare is the stalled fraction of elapsed between two totals, clamped to [0, 1].
func stallShare(prev, cur, elapsed time.Duration) float64 {
	if elapsed <= 0 || cur <= prev {
		return 0
	}
	return min(1, float64(cur-prev)/float64(elapsed))
}

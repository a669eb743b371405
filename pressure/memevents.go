package pressure

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MemoryCounts are the cumulative memory event counters of a cgroup: on cgroup v2
// the fields of memory.events; on v1, Max is memory.failcnt and OOMKill is
// memory.oom_control's oom_kill (High and OOM stay zero).
type MemoryCounts struct {
	High, Max, OOM, OOMKill uint64
}

// MemoryEventsConfig configures [OpenMemoryEvents].
type MemoryEventsConfig struct {
	// Name names the cgroup in events and errors.
	Name string
	// Read returns the current counters, e.g. from package cgroup's Group.MemoryEvents.
	Read func() (MemoryCounts, error)
	// Interval between reads; at least MinPollInterval (default 250ms).
	Interval time.Duration
	// Buffer is the capacity of the events channel (default 16).
	Buffer int
}

// OpenMemoryEvents polls a cgroup's memory event counters and delivers one [Event]
// per counter that grew (SignalMemHigh, SignalMemMax, SignalOOM, SignalOOMKill) with
// Count set to the increment. Counts present before the source opened are not
// reported. The source ends with nil when ctx is cancelled and with an error when a
// read fails (the cgroup was removed).
func OpenMemoryEvents(ctx context.Context, cfg MemoryEventsConfig) (Source, error) {
	if cfg.Read == nil {
		return nil, fmt.Errorf("memory events of %s: no reader", cfg.Name)
	}
	if cfg.Interval == 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.Interval < MinPollInterval {
		return nil, fmt.Errorf("memory events of %s: interval %s is below %s", cfg.Name, cfg.Interval, MinPollInterval)
	}
	first, err := cfg.Read()
	if err != nil {
		return nil, fmt.Errorf("memory events of %s: %w", cfg.Name, err)
	}
	buf := cfg.Buffer
	if buf <= 0 {
		buf = 16
	}
	s := &memSource{cfg: cfg, events: make(chan Event, buf), desc: fmt.Sprintf("memory events of %s every %s", cfg.Name, cfg.Interval)}
	go func() {
		s.err = s.loop(ctx, first)
		close(s.events)
	}()
	return s, nil
}

type memSource struct {
	cfg    MemoryEventsConfig
	desc   string
	events chan Event
	err    error
}

func (s *memSource) Events() <-chan Event { return s.events }
func (s *memSource) Err() error           { return s.err }
func (s *memSource) Describe() string     { return s.desc }

func (s *memSource) loop(ctx context.Context, prev MemoryCounts) error {
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		cur, err := s.cfg.Read()
		if err != nil {
			return fmt.Errorf("memory events of %s: %w", s.cfg.Name, err)
		}
		now := time.Now()
		for _, d := range []struct {
			sig       Signal
			prev, cur uint64
		}{
			{SignalOOMKill, prev.OOMKill, cur.OOMKill},
			{SignalOOM, prev.OOM, cur.OOM},
			{SignalMemMax, prev.Max, cur.Max},
			{SignalMemHigh, prev.High, cur.High},
		} {
			if d.cur <= d.prev {
				continue
			}
			ev := Event{Time: now, Source: "memory-events " + s.cfg.Name, Signal: d.sig, Count: d.cur - d.prev}
			select {
			case s.events <- ev:
			case <-ctx.Done():
				return nil
			}
		}
		prev = cur
	}
}

// Merge combines sources into one that delivers all their events. It ends when every
// source has ended; Err joins their errors. If one source fails, the others keep
// running. ctx must be the context the sources were opened with (or one cancelled
// with it): when it is cancelled, forwarding stops and the merged source ends once
// every source has.
func Merge(ctx context.Context, sources ...Source) Source {
	m := &mergeSource{events: make(chan Event, 16)}
	descs := ""
	for i, s := range sources {
		if i > 0 {
			descs += "; "
		}
		descs += s.Describe()
	}
	m.desc = descs
	done := make(chan error, len(sources))
	for _, s := range sources {
		go func() {
			for ev := range s.Events() {
				select {
				case m.events <- ev:
					continue
				case <-ctx.Done():
				}
				break
			}
			for range s.Events() {
				// Drain: the source ends on the same ctx.
			}
			done <- s.Err()
		}()
	}
	go func() {
		var errs []error
		for range sources {
			if err := <-done; err != nil {
				errs = append(errs, err)
			}
		}
		m.err = errors.Join(errs...)
		close(m.events)
	}()
	return m
}

type mergeSource struct {
	desc   string
	events chan Event
	err    error
}

func (m *mergeSource) Events() <-chan Event { return m.events }
func (m *mergeSource) Err() error           { return m.err }
func (m *mergeSource) Describe() string     { return m.desc }

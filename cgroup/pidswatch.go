package cgroup

import (
	"context"
	"fmt"
	"time"
)

// PidsEventSource reads the pids.events "max" counter; *[Group] satisfies it.
type PidsEventSource interface {
	PidsEvents() (uint64, error)
}

// DefaultPidsInterval is how often [WatchPids] polls when given no interval.
const DefaultPidsInterval = 250 * time.Millisecond

// WatchPids polls src's pids.events every interval (default [DefaultPidsInterval]) and
// calls fn with the total and the increase whenever the "max" counter grew: a fork or
// clone in the group failed on pids.max since the last look. The first reading is the
// baseline; failures before it are not reported. It returns ctx.Err() when ctx is done,
// or the first read error.
func WatchPids(ctx context.Context, src PidsEventSource, interval time.Duration, fn func(total, delta uint64)) error {
	if interval <= 0 {
		interval = DefaultPidsInterval
	}
	last, err := src.PidsEvents()
	if err != nil {
		return fmt.Errorf("watch pids: %w", err)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		n, err := src.PidsEvents()
		if err != nil {
			return fmt.Errorf("watch pids: %w", err)
		}
		if n > last {
			fn(n, n-last)
		}
		last = n
	}
}

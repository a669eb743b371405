package pressure

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Monitor runs a [Source] into a [Model], a [Gate] and a [Recorder]: each event is
// counted, fed to the model, and the resulting level is applied to the gate; timers
// let levels expire and permits recover when no events come. Gate and Recorder may
// be nil.
type Monitor struct {
	Source   Source
	Model    *Model
	Gate     *Gate
	Recorder *Recorder
	// OnEvent, if set, is called for every event with the level after it.
	OnEvent func(ev Event, level Level)
	// OnLevel, if set, is called on every level change.
	OnLevel func(from, to Level, at time.Time)
	// OnShedError, if set, receives shed callback errors (they never stop the monitor).
	OnShedError func(error)
}

// Run consumes the source until it ends or ctx is cancelled. It returns the source's
// error, or nil after cancellation. Open the source with ctx (or a context cancelled
// with it) so that it ends too. All timers Run starts are stopped when it returns.
func (m *Monitor) Run(ctx context.Context) error {
	if m.Source == nil || m.Model == nil {
		return errors.New("pressure monitor: Source and Model are required")
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	events := m.Source.Events()
	for {
		m.arm(timer, time.Now())
		select {
		case <-ctx.Done():
			// The source stops on its own context, which should be ctx or a parent's.
			return nil
		case ev, ok := <-events:
			if !ok {
				if err := m.Source.Err(); err != nil {
					return fmt.Errorf("pressure monitor: %w", err)
				}
				return nil
			}
			if m.Recorder != nil {
				m.Recorder.Event(ev)
			}
			from := m.Model.Level()
			level, changed := m.Model.Observe(ev)
			m.apply(ctx, from, level, changed, ev.Time)
			if m.OnEvent != nil {
				m.OnEvent(ev, level)
			}
		case now := <-timer.C:
			from := m.Model.Level()
			level, changed := m.Model.Advance(now)
			if changed {
				m.apply(ctx, from, level, changed, now)
			}
			if m.Gate != nil {
				m.Gate.Advance(now)
			}
		}
	}
}

func (m *Monitor) apply(ctx context.Context, from, level Level, changed bool, at time.Time) {
	if changed {
		if m.Recorder != nil {
			m.Recorder.Level(level, at)
		}
		if m.OnLevel != nil {
			m.OnLevel(from, level, at)
		}
	}
	if m.Gate != nil && m.Gate.Apply(level, at) {
		if err := m.Gate.Shed(ctx); err != nil && m.OnShedError != nil {
			m.OnShedError(err)
		}
	}
}

// arm sets the timer to the earliest of the model's and the gate's next deadlines.
func (m *Monitor) arm(timer *time.Timer, now time.Time) {
	next := m.Model.Next()
	if m.Gate != nil {
		if g := m.Gate.Advance(now); !g.IsZero() && (next.IsZero() || g.Before(next)) {
			next = g
		}
	}
	d := time.Hour
	if !next.IsZero() {
		d = max(next.Sub(now), time.Millisecond)
	}
	timer.Reset(d)
}

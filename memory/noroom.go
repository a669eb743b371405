package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pressure"
)

// NoRoomPolicy says what a paused loader does when the others in its cgroup
// alone leave it less than its own paused resident set ([Config.NoRoom]).
type NoRoomPolicy string

const (
	// LeaveNoRoom (the default) ends the run with a [*NoRoomError] (exit status
	// 3 in the launcher): both cannot fit, the kernel's OOM killer is next, and
	// it may choose the co-tenant even though the loader's oom_score_adj is
	// 1000 (measured in the spike grid at 95% of 256 MiB: the co-tenant's
	// resident set, its mapped binary included, exceeded the limit and
	// outscored the loader, 69,287 against 68,824 points, 2 of 2 runs).
	LeaveNoRoom NoRoomPolicy = "leave"
	// StayNoRoom stays paused and leaves the outcome to the kernel.
	StayNoRoom NoRoomPolicy = "stay"
)

// ParseNoRoomPolicy parses "leave" or "stay".
func ParseNoRoomPolicy(s string) (NoRoomPolicy, error) {
	switch NoRoomPolicy(s) {
	case LeaveNoRoom, StayNoRoom:
		return NoRoomPolicy(s), nil
	}
	return "", fmt.Errorf("no-room policy %q: want leave or stay", s)
}

// MinNoRoomMargin is the smallest room a paused loader keeps, beside its own
// resident set and the others', for the code of both processes
// ([Config.NoRoomMargin]).
const MinNoRoomMargin = 4 << 20

// NoRoomError ends a paused run under [LeaveNoRoom]: the others in the cgroup
// alone (what reclaim cannot take: anonymous, shared and unevictable memory)
// leave the loader less than what it holds itself after giving back all it
// can, and the margin both processes' code needs. It names the figures.
// errors.Is(err, ErrBelowFloor) is true.
type NoRoomError struct {
	// Report is the headroom report the decision was made on.
	Report pressure.HeadroomReport
	// Own is the loader's own resident memory that reclaim cannot take
	// (RssAnon + RssShmem: the less of the sample's and a reading after the
	// pause's shed); File its resident file pages (RssFile: its code, which
	// reclaim can take but it runs on).
	Own, File int64
	// Margin is the room for both processes' code.
	Margin int64
	// Growth is the others' growth in bytes per second when it was decided
	// (0: not growing), and Ahead what it adds to them within the few tens of
	// milliseconds the decision looks ahead.
	Growth float64
	Ahead  int64
	// Paused is how long the loader had been paused.
	Paused time.Duration
}

// Left is what the others leave the loader, their growth ahead included:
// limit − others − ahead.
func (e *NoRoomError) Left() int64 { return e.Report.Limit - e.Report.Others() - e.Ahead }

func (e *NoRoomError) Error() string {
	r := e.Report
	growing := ""
	if e.Growth > 0 {
		growing = fmt.Sprintf(" and grow by %s/s, %s within %v", bytesize.Human(int64(e.Growth)), bytesize.Human(e.Ahead), noRoomLookahead)
	}
	return fmt.Sprintf("left after a pause of %v: the others in the cgroup (%s) hold %s of its limit of %s%s, which leaves %s, less than the paused loader's own %s (RssAnon + RssShmem after giving back what it could; RssFile %s) and the %s both processes' code needs: both cannot fit, and the OOM killer may choose the co-tenant, so the loader stops rather than be the reason it is killed (resources.no_room: stay stays paused)",
		e.Paused.Round(time.Millisecond), r.Source, bytesize.Human(r.Others()), bytesize.Human(r.Limit), growing, bytesize.Human(e.Left()),
		bytesize.Human(e.Own), bytesize.Human(e.File), bytesize.Human(e.Margin))
}

// Is makes errors.Is(err, ErrBelowFloor) true.
func (e *NoRoomError) Is(target error) bool { return target == ErrBelowFloor }

// noRoomMargin is the margin under limit: Config.NoRoomMargin, or its default.
func (r *Runtime) noRoomMargin(limit int64) int64 {
	if m := r.cfg.NoRoomMargin; m > 0 {
		return m
	}
	return max(MinNoRoomMargin, limit/32)
}

// NoRoomEvery is how often a paused loader reads its cgroup's memory between
// the headroom's samples, to leave in time (LeaveNoRoom): a trainer's ramp
// measured in the spike grid rose by 123 MiB/s, 12 MiB between two headroom
// samples, and at 96% of 256 MiB the OOM killer came 7 MiB past the sample
// where the others still left the paused loader room.
const NoRoomEvery = 20 * time.Millisecond

// noRoomLookahead is how far ahead the others' growth is projected when
// deciding to leave: the time to the next reading and to exit.
const noRoomLookahead = 3 * NoRoomEvery

// noRoomLocked ends a paused run under [LeaveNoRoom] when the others alone
// (rep.Others, what reclaim cannot take, plus their growth over
// noRoomLookahead) leave the loader less than its own resident set and the
// margin; it returns the event to announce. It projects only that little
// ahead, not the headroom's lookahead: leaving cannot be undone, and a
// second's projection overshoots the top of a ramp by the growth of a second.
// Called with applyMu held, after shedPausedLocked.
func (r *Runtime) noRoomLocked(rep pressure.HeadroomReport, growth float64) (pause.Event, bool) {
	if r.cfg.NoRoom == StayNoRoom || !rep.Limited || r.stopErr != nil || r.pc == nil || !r.pc.Paused() {
		return pause.Event{}, false
	}
	// The sample's own part may have been read before this round of giving
	// back; a fresh reading after it, when it is less.
	own, file := rep.Self, int64(0)
	if o, f, ok := residentSelf(); ok {
		own, file = min(own, o), f
	}
	margin := r.noRoomMargin(rep.Limit)
	ahead := int64(max(0, growth) * noRoomLookahead.Seconds())
	if rep.Limit-rep.Others()-ahead >= own+margin {
		return pause.Event{}, false
	}
	err := &NoRoomError{Report: rep, Own: own, File: file, Margin: margin, Growth: max(0, growth), Ahead: ahead, Paused: r.pc.PausedFor(rep.At)}
	r.stopErr = err
	r.stopNoRoomWatchLocked()
	if r.stopRun != nil {
		r.stopRun(err)
	}
	reading := pause.Reading{At: rep.At, Current: rep.Current - ahead, Limit: rep.Limit, Others: rep.Others() + ahead, Reserve: rep.Reserve}
	if ahead > 0 {
		reading.Projected, reading.Now = true, rep.Current
	}
	return pause.Event{Kind: pause.Left, Reading: reading, Floor: r.cfg.Floor, Lasted: err.Paused, Own: own, Margin: margin}, true
}

// startNoRoomWatchLocked starts watching a pause for room every NoRoomEvery
// (LeaveNoRoom), until the resume, the run's end or Close. Called with applyMu
// held.
func (r *Runtime) startNoRoomWatchLocked() {
	if r.cfg.NoRoom == StayNoRoom || r.closed || r.head == nil {
		return
	}
	read := r.head.Config().Read
	r.noRoom.start(func(ctx context.Context) { r.watchNoRoom(ctx, read) })
}

// stopNoRoomWatchLocked stops the watch (it ends on its own soon after).
// Called with applyMu held.
func (r *Runtime) stopNoRoomWatchLocked() { r.noRoom.stop() }

// pauseWatch is a goroutine that watches a pause (for room, or its drain)
// until it is stopped (its fields under applyMu but wg).
type pauseWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// start runs watch in a goroutine of its own, unless one runs already.
func (w *pauseWatch) start(watch func(ctx context.Context)) {
	if w.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Go(func() { watch(ctx) })
}

// stop ends the watch (it returns soon after); wg.Wait waits for it.
func (w *pauseWatch) stop() {
	if w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
}

// watchNoRoom reads the cgroup's memory every NoRoomEvery while paused and
// leaves (noRoomLocked) when the others, growing as othersTrend says, leave
// the loader no room; it announces the event itself.
func (r *Runtime) watchNoRoom(ctx context.Context, read func() (pressure.MemorySample, error)) {
	t := time.NewTicker(NoRoomEvery)
	defer t.Stop()
	trend := newOthersTrend(r.head.Config().PeakWindow)
	if peak, ok := r.head.RecentPeak(); ok {
		trend.seed(time.Now(), peak)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s, err := read()
		if err != nil {
			continue
		}
		others := s.Others()
		now := time.Now()
		growth := trend.add(now, others)
		reserve := r.head.Last().Reserve
		rep := pressure.HeadroomReport{MemorySample: s, Current: s.Limit - others - reserve, Reserve: reserve, Growth: growth}
		r.applyMu.Lock()
		ev, ok := r.noRoomLocked(rep, growth)
		r.applyMu.Unlock()
		if ok {
			r.info("%s", ev.Message())
			if r.cfg.OnPause != nil {
				r.cfg.OnPause(ev)
			}
			return
		}
	}
}

// othersTrend follows the others' readings of a paused loader's watch and says
// how fast they grow, for the look ahead of the decision to leave. Only a rise
// above the others' recent peak (their highest reading of the last window, the
// headroom's samples before the pause included) counts: a trainer's step frees
// its activations and allocates the next batch's within a few tens of
// milliseconds, and the return to the height it held a moment ago, projected
// ahead, looked like a ramp to the limit (the trainer grid at 85% of 2 GiB:
// the others 11 MiB below their height at the pause's start but rising at
// 1.2 GiB/s over the watch's first readings, 76 MiB within 60 ms, left a
// loader that had 166 MiB for its own 37 MiB and the 64 MiB margin).
type othersTrend struct {
	window time.Duration // how long a reading counts toward the peak (negative: none)
	hist   []trendPoint  // the last 100 ms or so: the growth
	recent []trendPoint  // the last window: the peak
}

// trendPoint is one reading of the others.
type trendPoint struct {
	at     time.Time
	others int64
}

// newOthersTrend returns a trend without readings whose peak counts the
// readings of the last window (negative: only the previous reading).
func newOthersTrend(window time.Duration) *othersTrend { return &othersTrend{window: window} }

// seed counts peak, read at at, toward the recent peak (the headroom's
// [pressure.Headroom.RecentPeak] at the watch's start).
func (t *othersTrend) seed(at time.Time, peak int64) {
	if t.window >= 0 {
		t.recent = append(t.recent, trendPoint{at, peak})
	}
}

// add takes one reading (in time order) and returns the others' growth to
// project ahead, in bytes per second: 0 unless the reading is above their
// recent peak (the previous reading at least); then the least of their
// growth over the last 100 ms and their rise above that peak since the
// previous reading. A steady ramp rises above its peak at every reading, at
// its rate.
func (t *othersTrend) add(at time.Time, others int64) float64 {
	var prev trendPoint
	hasPrev := len(t.hist) > 0
	peak := int64(0)
	if hasPrev {
		prev = t.hist[len(t.hist)-1]
		peak = prev.others
	}
	i := 0
	for i < len(t.recent) && at.Sub(t.recent[i].at) > t.window {
		i++
	}
	t.recent = append(t.recent[:0], t.recent[i:]...)
	for _, p := range t.recent {
		peak = max(peak, p.others)
	}
	t.hist = append(t.hist, trendPoint{at, others})
	for len(t.hist) > 2 && at.Sub(t.hist[1].at) >= 100*time.Millisecond {
		t.hist = t.hist[1:]
	}
	if t.window >= 0 {
		t.recent = append(t.recent, trendPoint{at, others})
	}
	dt := at.Sub(prev.at).Seconds()
	if !hasPrev || dt <= 0 || others <= peak {
		return 0
	}
	rise := float64(others-peak) / dt
	growth := 0.0
	if d := at.Sub(t.hist[0].at).Seconds(); d > 0 {
		growth = float64(others-t.hist[0].others) / d
	}
	return max(0, min(growth, rise))
}

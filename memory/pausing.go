package memory

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pressure"
)

// pauseShedEvery bounds how often a paused loader gives memory back again: about
// every headroom sample, since what the reads in flight at the pause leave behind
// (decoded images, batches) becomes garbage over the pause's first second, while
// the co-tenant's peak is still rising.
const pauseShedEvery = 200 * time.Millisecond

// pauseDrainEvery is how often a paused loader looks at the bytes in flight
// (its budget in use) while the reads in flight at the pause are decoded and
// delivered, and pauseDrainStep how far they must fall before it gives memory
// back again ahead of pauseShedEvery: measured at 90% of 256 MiB, the reads in
// flight at the pause held 19 MiB of read buffers and the decodes and batches
// they fed, which became free over the pause's first second while the next
// round of giving back was up to 200 ms away.
const (
	pauseDrainEvery = 20 * time.Millisecond
	pauseDrainStep  = 2 << 20
	// pauseQuietAllocs is what the Go heap must have allocated since the
	// last round of giving back for a round in a settled pause to collect.
	pauseQuietAllocs = 1 << 20
)

// pauseState is what a paused runtime remembers (under applyMu).
type pauseState struct {
	lastShed     time.Time // last round of giving back
	shedInUse    int64     // the budget in use at the last round
	lastInUse    int64     // ... and at the drain watch's last look
	allocs       uint64    // the Go heap's allocations in all at the last round
	startInUse   int64     // the budget in use at the pause's first round
	drained      bool      // the drain watch saw the bytes in flight stop falling
	textReleased bool      // the program text was released in this pause
	textUnlocked bool      // ... and stays unlocked until the resume
}

// newPause makes the pause controller and gate of an Elastic runtime under
// [PauseBelowFloor]; inner is the pressure gate (nil without Pressure).
func (r *Runtime) newPause() error {
	pc, err := pause.New(pause.Config{Floor: r.cfg.Floor, Timeout: r.cfg.PauseTimeout})
	if err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	r.pc = pc
	if r.th != nil {
		r.pg = pause.NewGate(r.th.gate)
	} else {
		r.pg = pause.NewGate(nil)
	}
	if r.cfg.Registerer != nil {
		if r.unregPause, err = pause.Register(r.cfg.Registerer, pc); err != nil {
			return fmt.Errorf("memory: %w", err)
		}
	}
	return nil
}

// pauseLine is the start-up line that says when the loader pauses and resumes
// under rep's limit and reserve (rep is zero when no sample could be taken: the
// resume point is then the uncapped one, and said to be so). The resume point is
// [pause.Controller.ResumeAt], what the controller resumes at.
func (r *Runtime) pauseLine(rep pressure.HeadroomReport) string {
	timeout := "without end (pause timeout 0)"
	if t := r.pc.Config().Timeout; t > 0 {
		timeout = fmt.Sprintf("for at most %v", t)
	}
	limit, under := int64(0), " (no memory sample yet: less under a small limit)"
	switch {
	case rep.Limit > 0 && !rep.Limited:
		return fmt.Sprintf("below its floor of %s the loader would pause; no cgroup memory limit here (%s), so it does not",
			bytesize.Human(r.cfg.Floor), rep.Source)
	case rep.Limited:
		limit, under = rep.Limit, fmt.Sprintf(" (limit %s, reserve %s)", bytesize.Human(rep.Limit), bytesize.Human(rep.Reserve))
	}
	settle := ""
	if d := r.pc.Config().Settle; d > 0 {
		settle = fmt.Sprintf(", or at its floor once the cgroup has left it that for %v", d)
	}
	return fmt.Sprintf("below its floor of %s the loader pauses %s and resumes at %s%s%s",
		bytesize.Human(r.cfg.Floor), timeout, bytesize.Human(r.pc.ResumeAt(limit, rep.Reserve)), under, settle)
}

// pauseLocked follows one report under [PauseBelowFloor]: it pauses or resumes the
// reads, gives memory back while paused, and ends the run when a pause outlasts the
// timeout or, under [LeaveNoRoom], when the others alone leave the paused loader
// less than it holds (noRoomLocked). It returns the events to announce (after
// applyMu is released), in order. Called with applyMu held.
func (r *Runtime) pauseLocked(rep pressure.HeadroomReport) []pause.Event {
	if !rep.Limited {
		return nil
	}
	var evs []pause.Event
	ev, ok := r.pc.Observe(pauseReading(rep))
	if ok {
		switch ev.Kind {
		case pause.Paused:
			r.pg.Pause()
			r.paused = pauseState{}
			r.m.ran(ActionPause, 0)
			r.revokeReadPoolLocked()
			r.startNoRoomWatchLocked()
			r.startDrainWatchLocked()
		case pause.Resumed:
			r.stopNoRoomWatchLocked()
			r.stopDrainWatchLocked()
			r.relockTextLocked()
			r.pg.Resume()
			if r.rb != nil {
				r.rb.SetPressure(r.Level() >= pressure.LevelSome)
			}
		case pause.TimedOut:
			r.stopErr = &BelowFloorError{Report: rep, Floor: r.cfg.Floor, Paused: ev.Lasted, PauseTimeout: ev.Timeout, ResumeAt: ev.ResumeAt()}
			r.stopNoRoomWatchLocked()
			r.stopDrainWatchLocked()
			if r.stopRun != nil {
				r.stopRun(r.stopErr)
			}
		}
		r.setWorkersLocked()
		evs = append(evs, ev)
	}
	if r.pc.Paused() {
		r.shedPausedLocked()
		// Only the others' rise above their recent peak is looked ahead (see
		// othersTrend): their smoothed growth alone counts a trainer's step.
		if ev, ok := r.noRoomLocked(rep, min(rep.Growth, rep.Rise)); ok {
			evs = append(evs, ev)
		}
	}
	return evs
}

// pauseReading is what the pause decides on: what the cgroup leaves the loader now
// or, while the others grow, what it will leave a second ahead (the headroom's
// projection), whichever is less. Pausing on the projection starts giving memory
// back while a trainer's peak rises, before the peak leaves too little to give it
// back in; a pause the projection started without need is short, since the loader
// resumes as soon as the growth stops and the memory is there.
func pauseReading(rep pressure.HeadroomReport) pause.Reading {
	r := pause.Reading{At: rep.At, Current: rep.Current, Limit: rep.Limit, Others: rep.Others(), Reserve: rep.Reserve}
	if rep.Allowance < rep.Current {
		r.Current, r.Projected, r.Now = rep.Allowance, true, rep.Current
		r.Others = rep.Limit - rep.Reserve - rep.Allowance
	}
	return r
}

// revokeReadPoolLocked asks the readers to unregister the registered read pool at
// once ([ReadBuffers.Revoke]): its pinned memory is charged to the cgroup until
// they do, which they do as soon as their reads in flight are done, within the
// pause's first reads instead of at the end of the epoch. The pool's free chunks
// go back with the spill pool's (shedPausedLocked); reads go to the spill pool
// until the next epoch. Called with applyMu held.
func (r *Runtime) revokeReadPoolLocked() {
	if r.rb == nil {
		return
	}
	size := r.rb.Registered()
	if r.rb.Revoke() {
		r.m.ran(ActionReadBuffers, size)
		r.m.reg.Set(0)
	}
}

// shedPausedLocked gives back what a paused loader holds beyond what it cannot
// give (the first time in a pause after a further garbage collection): new reads
// go to the spill pool, whose free chunks go back to the kernel;
// the Go heap's and the C heap's free pages go back; the shed actions registered on the gate run
// (the sample cache gives back its coldest part each time); and, once per pause,
// the program text is unlocked and dropped, and stays unlocked until the resume
// ([UnlockProgramText]; in later pauses only if it grew again: releaseTextLocked).
// At most every pauseShedEvery. Called with applyMu held.
func (r *Runtime) shedPausedLocked() {
	if time.Since(r.paused.lastShed) < pauseShedEvery {
		return
	}
	r.shedNowLocked()
}

// shedNowLocked is one round of shedPausedLocked, whenever it was last.
// Called with applyMu held.
func (r *Runtime) shedNowLocked() {
	inUse, allocs := r.budget.InUse(), heapAllocs()
	// A round in a settled pause, with nothing decoded or allocated since the
	// last, collects nothing: the Go heap's collections are skipped then
	// (freeHeap), since each one walks every goroutine's stack and so faults
	// the program's unlocked read-only data back in.
	quiet := !r.paused.lastShed.IsZero() && inUse == r.paused.shedInUse && allocs-r.paused.allocs < pauseQuietAllocs
	r.quietShed.Store(quiet)
	defer r.quietShed.Store(false)
	r.paused.shedInUse, r.paused.lastInUse, r.paused.allocs = inUse, inUse, allocs
	if r.paused.lastShed.IsZero() {
		r.paused.startInUse = inUse
		// A collection first, so that the one in freeHeap frees what the
		// first moved out of sync.Pools (decode scratch, batch tensors).
		runtime.GC()
	}
	r.paused.lastShed = time.Now()
	if r.rb != nil {
		r.rb.SetPressure(true)
		if n, err := r.rb.ReleaseSpill(); err == nil {
			r.m.ran(ActionUMAIdle, n)
		}
	}
	if r.th != nil {
		ctx, cancel := context.WithTimeout(context.Background(), pauseShedEvery)
		if err := r.th.gate.Shed(ctx); err != nil {
			r.info("paused: a shed action failed: %v", err)
		}
		cancel()
	}
	r.freeHeap()
	r.trimCHeap()
	if r.cfg.Process.LockText && !r.paused.textReleased {
		r.paused.textReleased = true
		r.releaseTextLocked()
	}
}

// startDrainWatchLocked starts watching a pause's drain (watchDrain) until the
// resume, the run's end or Close. Called with applyMu held.
func (r *Runtime) startDrainWatchLocked() {
	if r.closed {
		return
	}
	r.drain.start(r.watchDrain)
}

// stopDrainWatchLocked stops the drain watch (it ends on its own soon after).
// Called with applyMu held.
func (r *Runtime) stopDrainWatchLocked() { r.drain.stop() }

// watchDrain gives memory back while the reads in flight at a pause are
// decoded and delivered, as soon as what they held is free instead of at the
// next headroom sample: every pauseDrainEvery it looks at the budget in use
// (the bytes in flight) and sheds (shedNowLocked) when it fell by
// pauseDrainStep since the last round, and once more when they stopped
// falling below what was in flight at the pause (the drain is done: then the
// program text the drain faulted in is released again too, if it grew by
// textRegrowth).
func (r *Runtime) watchDrain(ctx context.Context) {
	t := time.NewTicker(pauseDrainEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.applyMu.Lock()
		if r.closed || r.pc == nil || !r.pc.Paused() || r.stopErr != nil {
			r.applyMu.Unlock()
			return
		}
		p := &r.paused
		now := r.budget.InUse()
		switch {
		case p.lastShed.IsZero():
		case now <= p.shedInUse-pauseDrainStep:
			r.shedNowLocked()
		case now == p.lastInUse && now < p.startInUse && !p.drained:
			// The drain is done: what it ran of the program's code is
			// dropped again if it grew by textRegrowth (releaseTextLocked).
			p.drained, p.textReleased = true, false
			r.shedNowLocked()
		case now > p.lastInUse:
			p.drained = false
		}
		p.lastInUse = now
		r.applyMu.Unlock()
	}
}

// textRegrowth is how much the locked program text must have grown since it was
// last released before a later pause releases it again.
const textRegrowth = 2 << 20

// releaseTextLocked unlocks and drops the program text ([UnlockProgramText]) in
// the first pause, and in a later one only if what is resident grew by
// textRegrowth since: a loader that pauses and resumes often runs the same code
// each time, and dropping it again only makes it fault back in. The text stays
// unlocked until the resume (relockTextLocked): what the reads and decodes in
// flight fault in while they finish, in the pause's first second, is then
// reclaimable page cache, not unevictable memory charged to the cgroup while the
// co-tenant's peak rises. Called with applyMu held.
func (r *Runtime) releaseTextLocked() {
	if r.textMeter != nil && r.textReleases > 0 && r.textMeter()-r.textAfter < textRegrowth {
		return
	}
	n, err := UnlockProgramText()
	r.textReleases++
	r.paused.textUnlocked = true
	r.m.ran(ActionProgramText, n)
	if err != nil {
		r.info("paused: %v", err)
	}
	if r.textMeter != nil {
		r.textAfter = r.textMeter()
	}
}

// relockTextLocked locks the program text again as it is faulted in
// ([LockProgramText]) when a pause that unlocked it ends. Called with applyMu
// held.
func (r *Runtime) relockTextLocked() {
	if !r.paused.textUnlocked {
		return
	}
	r.paused.textUnlocked = false
	if _, err := LockProgramText(); err != nil {
		r.info("resumed: %v", err)
	}
}

// PauseStats returns how often the loader paused below its floor and for how long
// in all, the pause in progress included (0, 0 unless [PauseBelowFloor]).
func (r *Runtime) PauseStats() (pauses int, paused time.Duration) {
	if r.pc == nil {
		return 0, 0
	}
	return r.pc.Stats(time.Now())
}

// Paused reports whether the loader is paused now.
func (r *Runtime) Paused() bool { return r.pc != nil && r.pc.Paused() }

// PauseSummary is the summary line of n pauses below the floor that lasted d in
// all, e.g. "paused 2× below the floor, 6.2s in all" (for [Runtime.PauseStats]).
func PauseSummary(n int, d time.Duration) string {
	if n == 0 {
		return "never paused below the floor"
	}
	return fmt.Sprintf("paused %d× below the floor, %v in all", n, d.Round(100*time.Millisecond))
}

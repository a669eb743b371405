package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/internal/cheap"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pressure"
)

// waitFor polls cond every 10 ms until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pauseRecorder collects a runtime's Info lines and pause events.
type pauseRecorder struct {
	mu     sync.Mutex
	infos  []string
	events []pause.Kind
}

func (p *pauseRecorder) info(s string) { p.mu.Lock(); p.infos = append(p.infos, s); p.mu.Unlock() }
func (p *pauseRecorder) onPause(ev pause.Event) {
	p.mu.Lock()
	p.events = append(p.events, ev.Kind)
	p.mu.Unlock()
}

func (p *pauseRecorder) kinds() []pause.Kind {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]pause.Kind(nil), p.events...)
}

func (p *pauseRecorder) saw(sub string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.infos {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestRuntimePausesBelowFloor: the default policy. A co-tenant that leaves the
// loader less than its floor pauses the reads (the source waits at the gate, the
// consumer sees no error); once it leaves the floor plus the hysteresis the reads
// resume, and every item arrives once, in order. Asserted on events and counts.
func TestRuntimePausesBelowFloor(t *testing.T) {
	const n = 5000
	mem := &fakeMemory{at: time.Unix(1000, 0), others: 10 * mib}
	reg := prometheus.NewRegistry()
	rec := &pauseRecorder{}
	rt, err := New(Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 4, Registerer: reg,
		Headroom: pressure.HeadroomConfig{Read: mem.read, Reserve: 16 * mib}, Info: rec.info, OnPause: rec.onPause})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := flow.New("numbers", flow.WithRuntime(rt))
	var emitted atomic.Int64
	src := flow.Source(g, "numbers", func(ctx context.Context, out *flow.Emitter[int]) error {
		for i := range n {
			if err := out.Emit(ctx, i); err != nil {
				return err
			}
			emitted.Add(1)
		}
		return nil
	})
	var got []int
	flow.Sink(src, "consume", func(ctx context.Context, v int) error {
		got = append(got, v)
		if len(got) == 100 {
			mem.set(210 * mib) // 256 − 210 − 16 = 30 MiB < the 40 MiB floor
			// Hold the consumer until the pause, so that the source is still
			// emitting when it comes.
			for len(rec.kinds()) == 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	pg := rt.Gate().(*pause.Gate)
	waitFor(t, "pause with the source waiting at the gate", func() bool {
		k := rec.kinds()
		return len(k) == 1 && k[0] == pause.Paused && pg.Waiting() == 1
	})
	if e := emitted.Load(); e >= n {
		t.Fatalf("all %d items emitted through a paused gate", e)
	}
	// The budget is opened to its largest while paused (the reads wait at
	// the gate, before they take budget; what is in flight drains at once),
	// and the source still waits: the gate holds it, not the budget.
	if rt.Budget().Limit() != 64*mib || rt.Workers().Limit() != 1 {
		t.Errorf("paused: budget %d, workers %d; want the largest budget and one worker", rt.Budget().Limit(), rt.Workers().Limit())
	}
	if v := testutil.ToFloat64(rt.m.below); v != 1 {
		t.Errorf("psiflow_elastic_below_floor = %v while paused, want 1", v)
	}
	// 30 MiB now, or 20 MiB projected a second ahead (the others grew by 200 MiB
	// in one sample): either names what is left and the floor.
	if !rec.saw("paused: the cgroup leaves the loader 30 MiB (limit 256 MiB − others 210 MiB") &&
		!rec.saw("paused: the cgroup leaves the loader 20 MiB (limit 256 MiB − others growing to 220 MiB") {
		t.Errorf("no pause line naming the memory left: %q", rec.infos)
	}
	if !rec.saw("below its floor of 40 MiB: no reads until it leaves 50 MiB") {
		t.Errorf("no pause line naming the floor and the resume point: %q", rec.infos)
	}
	mem.set(10 * mib) // 256 − 10 − 16 = 230 MiB ≥ 40 + 10
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want the consumer to see a delay, not an error", err)
	}
	if len(got) != n {
		t.Fatalf("%d items delivered, want %d", len(got), n)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("item %d is %d: want every item once, in order", i, v)
		}
	}
	if k := rec.kinds(); len(k) != 2 || k[0] != pause.Paused || k[1] != pause.Resumed {
		t.Errorf("pause events %v, want paused then resumed", k)
	}
	if !rec.saw("resumed after a pause of") {
		t.Errorf("no resume line: %q", rec.infos)
	}
	if pauses, d := rt.PauseStats(); pauses != 1 || d <= 0 {
		t.Errorf("PauseStats = %d, %v; want one pause of some length", pauses, d)
	}
	if v := rt.ShedRuns()[ActionPause]; v != 1 {
		t.Errorf("shed action pause ran %v times, want 1", v)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, mf := range mfs {
		switch mf.GetName() {
		case "psiflow_pauses_total":
			found++
			if v := mf.GetMetric()[0].GetCounter().GetValue(); v != 1 {
				t.Errorf("psiflow_pauses_total = %v, want 1", v)
			}
		case "psiflow_paused_seconds_total":
			found++
			if v := mf.GetMetric()[0].GetCounter().GetValue(); v <= 0 {
				t.Errorf("psiflow_paused_seconds_total = %v, want > 0", v)
			}
		case "psiflow_paused":
			found++
			if v := mf.GetMetric()[0].GetGauge().GetValue(); v != 0 {
				t.Errorf("psiflow_paused = %v after the resume, want 0", v)
			}
		}
	}
	if found != 3 {
		t.Errorf("%d of the 3 pause metrics registered", found)
	}
}

// TestRuntimePauseTimeout: a pause longer than the timeout ends the run with the
// below-floor error, naming the pause; and every later graph of the runtime too.
func TestRuntimePauseTimeout(t *testing.T) {
	mem := &fakeMemory{at: time.Unix(1000, 0), others: 10 * mib}
	rec := &pauseRecorder{}
	rt, err := New(Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 2,
		// The fake clock moves 10 s per sample: the second sample of a pause outlasts 15 s.
		PauseTimeout: 15 * time.Second,
		Headroom:     pressure.HeadroomConfig{Read: mem.read, Reserve: 16 * mib}, Info: rec.info, OnPause: rec.onPause})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := flow.New("endless", flow.WithRuntime(rt))
	src := flow.Source(g, "numbers", func(ctx context.Context, out *flow.Emitter[int]) error {
		for i := 0; ; i++ {
			if err := out.Emit(ctx, i); err != nil {
				return err
			}
		}
	})
	var delivered int
	flow.Sink(src, "consume", func(context.Context, int) error {
		if delivered++; delivered == 100 {
			mem.set(210 * mib)
		}
		return nil
	})
	err = g.Run(ctx)
	var bfe *BelowFloorError
	if !errors.As(err, &bfe) || !errors.Is(err, ErrBelowFloor) || bfe.Paused <= 15*time.Second {
		t.Fatalf("Run = %v, want a BelowFloorError after a pause of more than 15 s", err)
	}
	if !strings.Contains(err.Error(), "stopped after a pause of") || !strings.Contains(err.Error(), "pause timeout of 15s") || !strings.Contains(err.Error(), "leaves the loader 30 MiB") {
		t.Errorf("message %q does not name the pause, its timeout and the memory left", err)
	}
	if k := rec.kinds(); len(k) != 2 || k[0] != pause.Paused || k[1] != pause.TimedOut {
		t.Errorf("events %v, want paused then timed out", k)
	}
	g2 := flow.New("next", flow.WithRuntime(rt))
	flow.Sink(flow.FromSlice(g2, "items", []int{1}), "consume", func(context.Context, int) error { return nil })
	if err := g2.Run(ctx); !errors.Is(err, ErrBelowFloor) {
		t.Fatalf("next graph: Run = %v, want ErrBelowFloor again", err)
	}
}

func TestRuntimePauseConfig(t *testing.T) {
	base := Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 2}
	c := base
	c.BelowFloor, c.PauseTimeout = StopBelowFloor, time.Minute
	if err := c.Validate(); err == nil {
		t.Error("a pause timeout with the stop policy validated")
	}
	for _, s := range []string{"pause", "stop", "run"} {
		if p, err := ParseFloorPolicy(s); err != nil || string(p) != s {
			t.Errorf("ParseFloorPolicy(%q) = %q, %v", s, p, err)
		}
	}
	if _, err := ParseFloorPolicy("wait"); err == nil || !strings.Contains(err.Error(), "pause, stop or run") {
		t.Errorf("ParseFloorPolicy(wait) = %v", err)
	}
}

func TestPauseSummary(t *testing.T) {
	tests := []struct {
		n    int
		d    time.Duration
		want string
	}{
		{0, 0, "never paused below the floor"},
		{1, 6104 * time.Millisecond, "paused 1× below the floor, 6.1s in all"},
		{3, 95 * time.Second, "paused 3× below the floor, 1m35s in all"},
	}
	for _, tt := range tests {
		if got := PauseSummary(tt.n, tt.d); got != tt.want {
			t.Errorf("PauseSummary(%d, %v) = %q; want %q", tt.n, tt.d, got, tt.want)
		}
	}
}

// TestPauseLinesSayWhereTheControllerResumes: the start-up line and the pause line
// name the headroom at which the loader resumes, and it is where the controller
// does resume, also under a limit small enough to cap the hysteresis (the start-up
// line used to add the uncapped hysteresis to the floor: 50 MiB where a 72 MiB
// limit resumes at 48 MiB).
func TestPauseLinesSayWhereTheControllerResumes(t *testing.T) {
	for _, limit := range []int64{256 * mib, 72 * mib, 60 * mib} {
		rec := &pauseRecorder{}
		mem := &fakeMemory{at: time.Unix(1000, 0), others: 0, limit: limit}
		rt, err := New(Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 2,
			Headroom: pressure.HeadroomConfig{Read: mem.read, Reserve: 8 * mib}, Info: rec.info, OnPause: rec.onPause})
		if err != nil {
			t.Fatalf("limit %d MiB: %v", limit/mib, err)
		}
		report := func(current int64, after ...time.Duration) pressure.HeadroomReport {
			d := 10 * time.Second
			if len(after) > 0 {
				d = after[0]
			}
			at := mem.advance(d)
			return pressure.HeadroomReport{MemorySample: pressure.MemorySample{At: at, Limit: limit, Limited: true},
				Current: current, Allowance: current, Reserve: 8 * mib}
		}
		// The smallest headroom that ends a pause, found by pausing and trying.
		lo, hi := int64(40*mib), limit-8*mib // resumes at hi, not below lo
		for lo < hi {
			mid := lo + (hi-lo)/2
			rt.applyHeadroom(report(mib)) // paused (or still)
			if !rt.Paused() {
				t.Fatalf("limit %d MiB: not paused at 1 MiB", limit/mib)
			}
			rt.applyHeadroom(report(mid))
			rt.applyHeadroom(report(mid, pause.DefaultCalm)) // calm, not yet settled
			if rt.Paused() {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		want := bytesize.Human(lo)
		rec.mu.Lock()
		var start, paused string
		for _, s := range rec.infos {
			switch {
			case strings.HasPrefix(s, "below its floor"):
				start = s
			case strings.HasPrefix(s, "paused:") && paused == "":
				paused = s
			}
		}
		rec.mu.Unlock()
		if !strings.Contains(start, "resumes at "+want+" (limit ") {
			t.Errorf("limit %d MiB: the controller resumes at %s; start-up line %q", limit/mib, want, start)
		}
		if !strings.Contains(paused, "no reads until it leaves "+want+", or its floor for 1s;") {
			t.Errorf("limit %d MiB: the controller resumes at %s; pause line %q", limit/mib, want, paused)
		}
		if err := rt.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPauseReleasesTextOnceUnlessItGrew: the first pause unlocks and drops the
// program text not run since; a later pause does so again only if the resident
// text grew by textRegrowth since (it ran at every pause before: a loader pausing
// and resuming often dropped the code it runs each time, to fault it back in).
func TestPauseReleasesTextOnceUnlessItGrew(t *testing.T) {
	rec := &pauseRecorder{}
	mem := &fakeMemory{at: time.Unix(1000, 0)}
	rt, err := New(Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 2,
		Process:  ProcessActions{LockText: true},
		Headroom: pressure.HeadroomConfig{Read: mem.read, Reserve: 16 * mib}, Info: rec.info, OnPause: rec.onPause})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.textMeter == nil {
		t.Skipf("the program text was not locked here: %q", rec.infos)
	}
	var text atomic.Int64
	rt.textMeter = func() int64 { return text.Load() }
	report := func(current int64) pressure.HeadroomReport {
		at := mem.advance(10 * time.Second)
		return pressure.HeadroomReport{MemorySample: pressure.MemorySample{At: at, Limit: 256 * mib, Limited: true},
			Current: current, Allowance: current, Reserve: 16 * mib}
	}
	for i, step := range []struct {
		text     int64
		releases float64 // program_text runs after this pause
	}{
		{10 * mib, 1},                  // the first pause releases
		{10*mib + textRegrowth/2, 1},   // grew by less: kept
		{10*mib + textRegrowth + 1, 2}, // grew by more: released again
		{10*mib + textRegrowth + 1, 2}, // unchanged since: kept
	} {
		text.Store(step.text)
		rt.applyHeadroom(report(mib))
		if !rt.Paused() {
			t.Fatalf("pause %d: not paused", i+1)
		}
		if got := rt.ShedRuns()[ActionProgramText]; got != step.releases {
			t.Errorf("pause %d with %d KiB of text: program_text ran %v times in all, want %v", i+1, step.text>>10, got, step.releases)
		}
		rt.applyHeadroom(report(200 * mib))
		rt.applyHeadroom(report(200 * mib)) // pause.DefaultCalm later
		if rt.Paused() {
			t.Fatalf("pause %d: not resumed", i+1)
		}
	}
}

// vmLocked is VmLck of /proc/self/status in bytes.
func vmLocked(t *testing.T) int64 {
	t.Helper()
	v, err := cgroup.ReadProcSizes("/proc/self/status", "VmLck:")
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

// TestPauseShedsAtItsStart: what a pause gives back, it gives back when it
// starts, not when the epoch ends: the registered read pool is revoked (the
// readers are asked to unregister it, new reads go to the spill pool, its free
// chunks go back to the kernel while a leased buffer keeps its bytes), the C heap
// is trimmed where glibc has malloc_trim, and the program text is unlocked until
// the resume. The next epoch registers a pool again. Asserted on the read buffers,
// the shed counters and VmLck.
func TestPauseShedsAtItsStart(t *testing.T) {
	rec := &pauseRecorder{}
	mem := &fakeMemory{at: time.Unix(1000, 0)}
	reg := prometheus.NewRegistry()
	rt, err := New(Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 2,
		Process: ProcessActions{LockText: true}, Registerer: reg,
		Headroom: pressure.HeadroomConfig{Read: mem.read, Reserve: 16 * mib}, Info: rec.info, OnPause: rec.onPause})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if rt.rb == nil {
		t.Skipf("no UMA read buffers here: %q", rec.infos)
	}
	rb := rt.rb
	regions := rb.Regions()
	if len(regions) != 1 || rb.Registered() != ElasticReadPool {
		t.Fatalf("before the pause: %d regions, %d bytes registered; want one of %d", len(regions), rb.Registered(), ElasticReadPool)
	}
	region := regions[0]
	inRegion := func(b []byte) bool {
		return unsafe.SliceData(b) != nil && uintptr(unsafe.Pointer(unsafe.SliceData(b))) >= uintptr(unsafe.Pointer(unsafe.SliceData(region))) &&
			uintptr(unsafe.Pointer(unsafe.SliceData(b)))+uintptr(len(b)) <= uintptr(unsafe.Pointer(unsafe.SliceData(region)))+uintptr(len(region))
	}
	ctx := context.Background()
	held, err := rb.Alloc(ctx, 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	copy(held.Bytes(), "held")
	freed, err := rb.Alloc(ctx, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !inRegion(held.Bytes()) || !inRegion(freed.Bytes()) {
		t.Fatal("reads before the pause did not go to the registered pool")
	}
	for i := range freed.Bytes() {
		freed.Bytes()[i] = 1 // resident
	}
	freed.Release()
	revoked := rb.Revoked()
	locked := vmLocked(t)
	textLocked := rt.textMeter != nil
	report := func(current int64) pressure.HeadroomReport {
		at := mem.advance(10 * time.Second)
		return pressure.HeadroomReport{MemorySample: pressure.MemorySample{At: at, Limit: 256 * mib, Limited: true},
			Current: current, Allowance: current, Reserve: 16 * mib}
	}
	runs := rt.ShedRuns()
	rt.applyHeadroom(report(mib))
	if !rt.Paused() {
		t.Fatal("not paused")
	}
	select {
	case <-revoked:
	default:
		t.Fatal("the pause's start did not revoke the registered read pool")
	}
	if r := rb.Regions(); len(r) != 0 || rb.Registered() != 0 {
		t.Errorf("paused: %d regions, %d bytes registered; want none", len(r), rb.Registered())
	}
	if got := rt.ShedRuns()[ActionReadBuffers] - runs[ActionReadBuffers]; got != 1 {
		t.Errorf("read_buffers ran %v times at the pause's start, want 1", got)
	}
	if v := testutil.ToFloat64(rt.m.freed.WithLabelValues(ActionUMAIdle)); v < 1<<20 {
		t.Errorf("uma_idle gave back %v bytes at the pause's start, want at least the registered pool's free MiB", v)
	}
	if string(held.Bytes()[:4]) != "held" {
		t.Errorf("a buffer leased before the pause lost its bytes: %q", held.Bytes()[:4])
	}
	during, err := rb.Alloc(ctx, 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	if inRegion(during.Bytes()) {
		t.Error("a read during the pause went to the revoked registered pool")
	}
	during.Release()
	if cheap.Available() == nil && rt.ShedRuns()[ActionCHeap]-runs[ActionCHeap] < 1 {
		t.Error("the pause's start did not trim the C heap")
	}
	if textLocked {
		if got := rt.ShedRuns()[ActionProgramText] - runs[ActionProgramText]; got != 1 {
			t.Errorf("program_text ran %v times at the pause's start, want 1", got)
		}
		if now := vmLocked(t); now >= locked {
			t.Errorf("VmLck %d kB while paused, %d kB before: the text was not unlocked", now>>10, locked>>10)
		}
	}
	rt.applyHeadroom(report(200 * mib))
	rt.applyHeadroom(report(200 * mib)) // pause.DefaultCalm later
	if rt.Paused() {
		t.Fatal("not resumed")
	}
	if textLocked {
		if now := vmLocked(t); now < locked {
			t.Errorf("VmLck %d kB after the resume, %d kB before the pause: the text was not locked again", now>>10, locked>>10)
		}
	}
	held.Release()
	if err := rt.nextEpoch(); err != nil {
		t.Fatal(err)
	}
	if r := rb.Regions(); len(r) != 1 || rb.Registered() == 0 {
		t.Errorf("next epoch: %d regions, %d bytes registered; want a registered pool again", len(r), rb.Registered())
	}
	select {
	case <-rb.Revoked():
		t.Error("the next epoch's pool is revoked already")
	default:
	}
}

// TestRuntimeLeavesWithoutRoom: the others alone leave a paused loader less
// than its own resident set and the margin: under the default (LeaveNoRoom)
// the run ends with a NoRoomError naming the limit, the others and the
// loader's own memory, after a "left" event; a later graph ends with it too.
// Where the others leave enough for it, or under StayNoRoom, it stays paused
// and resumes.
func TestRuntimeLeavesWithoutRoom(t *testing.T) {
	for _, tt := range []struct {
		name   string
		policy NoRoomPolicy
		others int64 // at the pause
		leaves bool
	}{
		// 256 − 250 = 6 MiB, less than the loader's own (≤ 10 MiB) + 8 MiB
		{"the default leaves", "", 250 * mib, true},
		{"leave", LeaveNoRoom, 250 * mib, true},
		// 256 − 228 = 28 MiB ≥ 10 + 8 MiB: room for the paused loader
		{"room for the paused loader", "", 228 * mib, false},
		{"stay", StayNoRoom, 250 * mib, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := &fakeMemory{at: time.Unix(1000, 0), others: 10 * mib}
			rec := &pauseRecorder{}
			rt, err := New(Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 2, NoRoom: tt.policy,
				Headroom: pressure.HeadroomConfig{Read: mem.read, Reserve: 16 * mib}, Info: rec.info, OnPause: rec.onPause})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const n = 3000
			g := flow.New("numbers", flow.WithRuntime(rt))
			src := flow.Source(g, "numbers", func(ctx context.Context, out *flow.Emitter[int]) error {
				for i := range n {
					if err := out.Emit(ctx, i); err != nil {
						return err
					}
				}
				return nil
			})
			var got []int
			flow.Sink(src, "consume", func(ctx context.Context, v int) error {
				got = append(got, v)
				if len(got) == 100 {
					mem.set(tt.others)
					for !rt.Paused() && ctx.Err() == nil {
						time.Sleep(5 * time.Millisecond)
					}
					if !tt.leaves {
						// Paused for a few samples, then the peak is over.
						at := mem.samples()
						for mem.samples() < at+5 && ctx.Err() == nil {
							time.Sleep(5 * time.Millisecond)
						}
						mem.set(10 * mib)
					}
				}
				return nil
			})
			err = g.Run(ctx)
			if !tt.leaves {
				if err != nil || len(got) != n {
					t.Fatalf("Run = %v with %d of %d items, want every item and no error", err, len(got), n)
				}
				if k := rec.kinds(); len(k) != 2 || k[0] != pause.Paused || k[1] != pause.Resumed {
					t.Errorf("events %v, want paused then resumed", k)
				}
				return
			}
			var nre *NoRoomError
			if !errors.As(err, &nre) || !errors.Is(err, ErrBelowFloor) {
				t.Fatalf("Run = %v, want a NoRoomError", err)
			}
			for _, want := range []string{"left after a pause of", "hold 250 MiB of its limit of 256 MiB", "less than the paused loader's own", "and the 8 MiB both processes' code needs", "resources.no_room: stay"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			// 6 MiB left now, less the others' growth ahead (the fake's jump)
			if left := nre.Report.Limit - nre.Report.Others(); nre.Own <= 0 || nre.Own > 10*mib || left != 6*mib || nre.Left() != left-nre.Ahead || nre.Margin != 8*mib {
				t.Errorf("own %d, left %d (%d ahead), margin %d bytes: want own in (0, 10 MiB], 6 MiB left now, an 8 MiB margin (limit/32)", nre.Own, nre.Left(), nre.Ahead, nre.Margin)
			}
			waitFor(t, "the left event", func() bool { return len(rec.kinds()) >= 2 }) // announced after the run was stopped
			if k := rec.kinds(); len(k) != 2 || k[0] != pause.Paused || k[1] != pause.Left {
				t.Errorf("events %v, want paused then left", k)
			}
			if !rec.saw("left after a pause of") || !rec.saw(" 256 MiB, which leaves ") || !rec.saw("less than the paused loader's own") {
				rec.mu.Lock()
				t.Errorf("no line for leaving naming the figures: %q", rec.infos)
				rec.mu.Unlock()
			}
			if len(got) >= n {
				t.Errorf("all %d items delivered by a loader that left", len(got))
			}
			g2 := flow.New("next", flow.WithRuntime(rt))
			flow.Sink(flow.FromSlice(g2, "items", []int{1}), "consume", func(context.Context, int) error { return nil })
			if err := g2.Run(ctx); !errors.As(err, &nre) {
				t.Fatalf("next graph: Run = %v, want the NoRoomError again", err)
			}
		})
	}
}

// TestRuntimeLeavesBetweenHeadroomSamples: a paused loader reads its cgroup
// every NoRoomEvery, not only at the headroom's samples (here one a minute):
// the others rising from 228 MiB (room for it) to 250 MiB (none) after the
// pause end the run before the next headroom sample.
func TestRuntimeLeavesBetweenHeadroomSamples(t *testing.T) {
	mem := &fakeMemory{at: time.Unix(1000, 0), others: 228 * mib}
	rec := &pauseRecorder{}
	rt, err := New(Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 2,
		Headroom: pressure.HeadroomConfig{Read: mem.read, Reserve: 16 * mib, Interval: time.Minute}, Info: rec.info, OnPause: rec.onPause})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if !rt.Paused() {
		t.Fatal("not paused by New's first sample (12 MiB left of a 40 MiB floor)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := flow.New("numbers", flow.WithRuntime(rt))
	flow.Sink(flow.FromSlice(g, "items", []int{1, 2, 3}), "consume", func(context.Context, int) error { return nil })
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	waitFor(t, "watch samples", func() bool { return mem.samples() >= 4 })
	mem.set(250 * mib)
	var nre *NoRoomError
	if err := <-done; !errors.As(err, &nre) || nre.Report.Limit-nre.Report.Others() != 6*mib {
		t.Fatalf("Run = %v, want a NoRoomError with 6 MiB left", err)
	}
	// The watch announces after it stopped the run.
	waitFor(t, "the left event", func() bool { return len(rec.kinds()) == 2 })
	if k := rec.kinds(); k[0] != pause.Paused || k[1] != pause.Left {
		t.Errorf("events %v, want paused then left", k)
	}
}

// TestPauseShedsAsTheDrainEnds: the reads in flight at a pause (their budget
// taken, their buffers leased and resident) are decoded and delivered while
// the loader is paused; what they held goes back to the kernel as soon as they
// are, without waiting for another headroom report (none comes in this test:
// only the drain watch can give it back). While paused, the budget is open to
// its largest, so a decode's reservation is granted at once, not after a
// 50 ms overdraft wait. Asserted on the budget and on RssAnon from
// /proc/self/status, which must fall by at least three quarters of the
// buffers' bytes.
func TestPauseShedsAsTheDrainEnds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int // bytes per read buffer
		reads int
	}{
		{"24 reads of 1 MiB", 1 << 20, 24},
		{"96 reads of 256 KiB", 256 << 10, 96},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &pauseRecorder{}
			mem := &fakeMemory{at: time.Unix(1000, 0)}
			rt, err := New(Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 2,
				Registerer: prometheus.NewRegistry(), NoRoom: StayNoRoom,
				Headroom: pressure.HeadroomConfig{Read: mem.read, Reserve: 16 * mib}, Info: rec.info, OnPause: rec.onPause})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			if rt.rb == nil {
				t.Skipf("no UMA read buffers here: %q", rec.infos)
			}
			if residentAnon() == 0 {
				t.Skip("/proc/self/status has no RssAnon here")
			}
			ctx := context.Background()
			total := int64(tc.size * tc.reads)
			if err := rt.Budget().Acquire(ctx, total); err != nil {
				t.Fatal(err)
			}
			rt.rb.SetPressure(true) // to the spill pool, whose chunks can go back
			var bufs []interface{ Release() }
			for range tc.reads {
				b, err := rt.rb.Alloc(ctx, tc.size)
				if err != nil {
					t.Fatal(err)
				}
				for i := range b.Bytes() {
					b.Bytes()[i] = 1 // resident
				}
				bufs = append(bufs, b)
			}
			held, samples := residentAnon(), mem.samples()
			at := mem.advance(10 * time.Second)
			rt.applyHeadroom(pressure.HeadroomReport{MemorySample: pressure.MemorySample{At: at, Limit: 256 * mib, Limited: true},
				Current: mib, Allowance: mib, Reserve: 16 * mib})
			if !rt.Paused() {
				t.Fatal("not paused")
			}
			if got := rt.Budget().Limit(); got != 64*mib {
				t.Errorf("paused with %s in flight: budget %s, want the largest, 64 MiB", bytesize.Human(total), bytesize.Human(got))
			}
			if !rt.Budget().TryAcquire(4 * mib) {
				t.Errorf("paused with %s in flight: a decode's 4 MiB reservation was refused", bytesize.Human(total))
			} else {
				rt.Budget().Release(4 * mib)
			}
			// The drain: every read decoded and delivered.
			for _, b := range bufs {
				b.Release()
			}
			rt.Budget().Release(total)
			want := held - total*3/4
			waitFor(t, fmt.Sprintf("RssAnon at or below %s (%s with the reads in flight)", bytesize.Human(want), bytesize.Human(held)), func() bool {
				return residentAnon() <= want
			})
			if n := mem.samples() - samples; n != 0 {
				t.Errorf("%d headroom samples read while paused: the shed may have come from a report, not the drain watch", n)
			}
		})
	}
}

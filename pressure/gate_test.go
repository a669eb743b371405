package pressure

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gateStep applies a level (or, with Advance set, only advances time) at offset At
// and expects the limit after it; Shed says whether Apply asked for a shed.
type gateStep struct {
	At      time.Duration
	Level   Level
	Advance bool
	Limit   int
	Shed    bool
}

func TestGatePolicy(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	pol := Policy{MaxPermits: 16, MinPermits: 1, Cut: 0.5, CutEvery: s, Quiet: 2 * s, Step: 2, StepEvery: 500 * ms, ShedEvery: s}
	tests := []struct {
		name  string
		p     Policy
		steps []gateStep
		want  map[Decision]uint64
	}{
		{"some cuts multiplicatively, at most once per CutEvery", pol, []gateStep{
			{At: 0, Level: LevelSome, Limit: 8},
			{At: 500 * ms, Level: LevelSome, Limit: 8},
			{At: s, Level: LevelSome, Limit: 4},
			{At: 2 * s, Level: LevelSome, Limit: 2},
			{At: 3 * s, Level: LevelSome, Limit: 1},
			{At: 4 * s, Level: LevelSome, Limit: 1},
		}, map[Decision]uint64{DecisionCut: 4}},
		{"full stops, normal recovers additively after quiet", pol, []gateStep{
			{At: 0, Level: LevelFull, Limit: 0},
			{At: s, Level: LevelNormal, Limit: 0},
			{At: 2900 * ms, Advance: true, Limit: 0},
			{At: 3 * s, Advance: true, Limit: 2},
			{At: 3499 * ms, Advance: true, Limit: 2},
			{At: 3500 * ms, Advance: true, Limit: 4},
			{At: 10 * s, Advance: true, Limit: 16},
		}, map[Decision]uint64{DecisionStop: 1, DecisionReopen: 1, DecisionRecover: 8}},
		{"pressure during recovery restarts the quiet period", pol, []gateStep{
			{At: 0, Level: LevelFull, Limit: 0},
			{At: s, Level: LevelNormal, Limit: 0},
			{At: 3 * s, Advance: true, Limit: 2},
			{At: 3200 * ms, Level: LevelSome, Limit: 1},
			{At: 3300 * ms, Level: LevelNormal, Limit: 1},
			{At: 5200 * ms, Advance: true, Limit: 1},
			{At: 5300 * ms, Advance: true, Limit: 3},
		}, nil},
		{"some after full reopens at the floor", pol, []gateStep{
			{At: 0, Level: LevelFull, Limit: 0},
			{At: 100 * ms, Level: LevelSome, Limit: 1},
		}, map[Decision]uint64{DecisionReopen: 1, DecisionCut: 0}},
		{"a zero floor lets some close the gate", Policy{MaxPermits: 2, MinPermits: 0, DisableMinDefault: true, CutEvery: time.Nanosecond}, []gateStep{
			{At: 0, Level: LevelSome, Limit: 1},
			{At: 1, Level: LevelSome, Limit: 0},
		}, map[Decision]uint64{DecisionStop: 1, DecisionCut: 2}},
		{"critical stops and asks to shed, rate-limited", pol, []gateStep{
			{At: 0, Level: LevelCritical, Limit: 0, Shed: true},
			{At: 500 * ms, Level: LevelCritical, Limit: 0},
			{At: s, Level: LevelCritical, Limit: 0, Shed: true},
			{At: 1100 * ms, Level: LevelFull, Limit: 0},
			{At: 1200 * ms, Level: LevelCritical, Limit: 0, Shed: true},
		}, map[Decision]uint64{DecisionStop: 1}},
		{"full keeps FullPermits, never more than some left", func() Policy { p := pol; p.FullPermits = 4; return p }(), []gateStep{
			{At: 0, Level: LevelFull, Limit: 4},
			{At: 100 * ms, Level: LevelSome, Limit: 2},
			{At: 200 * ms, Level: LevelFull, Limit: 2},
			{At: 300 * ms, Level: LevelCritical, Limit: 0, Shed: true},
			{At: 400 * ms, Level: LevelFull, Limit: 4},
		}, map[Decision]uint64{DecisionStop: 1, DecisionReopen: 1}},
		{"no recovery past the maximum", pol, []gateStep{
			{At: 0, Level: LevelNormal, Limit: 16},
			{At: 10 * s, Advance: true, Limit: 16},
		}, map[Decision]uint64{DecisionRecover: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGate(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tt.steps {
				at := t0.Add(st.At)
				shed := false
				if !st.Advance {
					shed = g.Apply(st.Level, at)
				}
				g.Advance(at)
				if got := g.Limit(); got != st.Limit || shed != st.Shed {
					t.Fatalf("step %d (%+v): limit %d shed %v, want %d %v", i, st, got, shed, st.Limit, st.Shed)
				}
			}
			stats := g.Stats()
			for d, n := range tt.want {
				if stats.Decisions[d] != n {
					t.Errorf("%v decisions = %d, want %d (all: %v)", d, stats.Decisions[d], n, stats.Decisions)
				}
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		p       Policy
		wantErr string
	}{
		{Policy{}, ""},
		{Policy{MaxPermits: -1}, "MaxPermits"},
		{Policy{MaxPermits: 2, MinPermits: 3}, "MinPermits"},
		{Policy{MaxPermits: 2, FullPermits: 3}, "FullPermits"},
		{Policy{FullPermits: -1}, "FullPermits"},
		{Policy{Cut: 1}, "Cut"},
		{Policy{Step: -1}, "Step"},
		{Policy{Quiet: -time.Second}, "negative"},
	}
	for _, tt := range tests {
		_, err := NewGate(tt.p)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("NewGate(%+v) error = %v, want %q", tt.p, err, tt.wantErr)
		}
	}
}

// TestGateInFlightCompletes: a stop does not revoke held permits; new Acquires wait
// until the gate reopens, and are served in order.
func TestGateInFlightCompletes(t *testing.T) {
	g, err := NewGate(Policy{MaxPermits: 2, Quiet: time.Second, Step: 1, StepEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		if err := g.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	g.Apply(LevelFull, t0)
	// In-flight work releases normally.
	g.Release()
	if g.TryAcquire() {
		t.Fatal("TryAcquire succeeded on a stopped gate")
	}
	order := make(chan int, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Acquire(ctx); err != nil {
				t.Error(err)
				return
			}
			order <- i
		}()
		waitFor(t, func() bool { return g.Stats().Waiting == i+1 })
	}
	g.Release() // last in-flight permit back: still stopped, nobody admitted
	if st := g.Stats(); st.InUse != 0 || st.Waiting != 2 {
		t.Fatalf("after release on a stopped gate: %+v", st)
	}
	g.Apply(LevelNormal, t0.Add(time.Second))
	g.Advance(t0.Add(2 * time.Second)) // first recovery step: one permit, to the first waiter
	if first := <-order; first != 0 {
		t.Fatalf("first admitted waiter %d, want 0 (FIFO)", first)
	}
	if st := g.Stats(); st.Limit != 1 || st.Waiting != 1 {
		t.Fatalf("after one step: %+v", st)
	}
	g.Advance(t0.Add(3 * time.Second))
	wg.Wait()
	if second := <-order; second != 1 {
		t.Fatalf("second admitted waiter %d, want 1", second)
	}
	st := g.Stats()
	if st.InUse != 2 || st.Decisions[DecisionAdmitAfterWait] != 2 || st.Decisions[DecisionRefuse] != 1 {
		t.Fatalf("stats %+v", st)
	}
	g.Release()
	g.Release()
}

func TestGateAcquireCancel(t *testing.T) {
	g, err := NewGate(Policy{MaxPermits: 1})
	if err != nil {
		t.Fatal(err)
	}
	g.Apply(LevelFull, t0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.Acquire(ctx) }()
	waitFor(t, func() bool { return g.Stats().Waiting == 1 })
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "level full") {
		t.Fatalf("Acquire error = %v, want context.Canceled naming the level", err)
	}
	st := g.Stats()
	if st.Waiting != 0 || st.InUse != 0 || st.Decisions[DecisionCancel] != 1 {
		t.Fatalf("after cancel: %+v", st)
	}
	// An already-cancelled context on an open gate still gets a permit on the fast path
	// only when one is free; on a closed gate it fails at once.
	if err := g.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a dead context on a closed gate = %v", err)
	}
}

// TestGateRaceCancelGrant hammers the window where a permit is granted as the waiter
// gives up: permits must never leak or double.
func TestGateRaceCancelGrant(t *testing.T) {
	g, err := NewGate(Policy{MaxPermits: 3})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var held atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				ctx, cancel := context.WithCancel(context.Background())
				if (i+w)%3 == 0 {
					cancel()
				}
				if g.Acquire(ctx) == nil {
					if n := held.Add(1); n > 3 {
						t.Errorf("%d permits held, limit 3", n)
					}
					held.Add(-1)
					g.Release()
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	if st := g.Stats(); st.InUse != 0 || st.Waiting != 0 {
		t.Fatalf("after the storm: %+v", st)
	}
}

func TestGateShed(t *testing.T) {
	g, err := NewGate(Policy{})
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	g.OnShed("uma", func(context.Context) error { calls = append(calls, "uma"); return nil })
	g.OnShed("page-cache", func(context.Context) error { calls = append(calls, "page-cache"); return errors.New("fadvise: EBADF") })
	err = g.Shed(context.Background())
	if err == nil || !strings.Contains(err.Error(), "shed page-cache: fadvise") {
		t.Fatalf("Shed error = %v, want the failing callback named", err)
	}
	if strings.Join(calls, ",") != "uma,page-cache" {
		t.Fatalf("calls %v", calls)
	}
	st := g.Stats()
	if st.Decisions[DecisionShed] != 1 || st.Decisions[DecisionShedError] != 1 {
		t.Fatalf("decisions %v", st.Decisions)
	}
}

func TestGateReleaseWithoutPermitPanics(t *testing.T) {
	g, _ := NewGate(Policy{})
	defer func() {
		if recover() == nil {
			t.Fatal("Release without a permit did not panic")
		}
	}()
	g.Release()
}

// waitFor polls cond (a test helper; the deadline is generous).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func BenchmarkGateAcquireRelease(b *testing.B) {
	g, err := NewGate(Policy{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Acquire(ctx); err != nil {
			b.Fatal(err)
		}
		g.Release()
	}
}

func BenchmarkGateAcquireReleaseParallel(b *testing.B) {
	g, err := NewGate(Policy{MaxPermits: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := g.Acquire(ctx); err != nil {
				b.Error(err)
				return
			}
			g.Release()
		}
	})
}

// TestGateTricklesWhileStopped: a gate stopped at Full with nothing in flight
// admits one waiter per Policy.Trickle, so the loader runs at its floor instead of
// waiting for ever; while an admitted element is in flight it admits none.
func TestGateTricklesWhileStopped(t *testing.T) {
	g, err := NewGate(Policy{MaxPermits: 4, Trickle: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(100, 0)
	g.Apply(LevelFull, t0)
	got := make(chan error, 2)
	for range 2 {
		go func() { got <- g.Acquire(context.Background()) }()
	}
	for deadline := time.Now().Add(10 * time.Second); g.Stats().Waiting != 2; {
		if time.Now().After(deadline) {
			t.Fatalf("waiters: %+v", g.Stats())
		}
		runtime.Gosched()
	}
	steps := []struct {
		at       time.Duration
		release  bool // release the permit granted before this step
		admitted int  // waiters admitted by now
	}{
		{0, false, 0},                      // idle is first seen
		{50 * time.Millisecond, false, 0},  // not yet a trickle's wait
		{100 * time.Millisecond, false, 1}, // one admitted
		{300 * time.Millisecond, false, 1}, // it is in flight: nothing more
		{400 * time.Millisecond, true, 1},  // released: idle seen again
		{500 * time.Millisecond, false, 2}, // the second admitted
	}
	admitted := 0
	for i, st := range steps {
		if st.release {
			g.Release()
		}
		if next := g.Advance(t0.Add(st.at)); next.IsZero() {
			t.Fatalf("step %d: a stopped gate with waiters asked not to be called back", i)
		}
		for admitted < st.admitted {
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
				admitted++
			case <-time.After(10 * time.Second):
				t.Fatalf("step %d: %d admitted, want %d", i, admitted, st.admitted)
			}
		}
		select {
		case <-got:
			t.Fatalf("step %d: more than %d admitted", i, st.admitted)
		default:
		}
	}
	if n := g.Stats().Decisions[DecisionTrickle]; n != 2 {
		t.Fatalf("trickle decisions %d, want 2", n)
	}
	g.Release()
}

//go:build linux

package uma

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	var src patternRehydrate
	a, err := u.NewArena("rec", 4*u.ChunkSize(), ArenaOptions{Rehydrate: src.fn})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Hydrate(ctx, 0, a.Size()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.MarkPreemptible(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The kernel takes chunk 1 entirely and one page of chunk 3.
	takeByKernel(t, u, a.span(1))
	takeByKernel(t, u, a.span(3)[:u.page])
	if n := nonResident(t, a, 1); n == 0 {
		t.Fatal("chunk 1 is still resident after the kernel took it")
	}
	res, err := u.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Checked != 4 || res.Reclaimed != 2 || res.Bytes != 2*u.ChunkSize() {
		t.Fatalf("Reconcile = %+v, want 4 checked, 2 reclaimed", res)
	}
	s := u.Snapshot()
	if s.PreemptibleMarked != 2*u.ChunkSize() || s.States[Evicted] != 2 || s.Faults != 2 {
		t.Fatalf("after reconcile: marked %d, states %v, faults %d", s.PreemptibleMarked, s.States, s.Faults)
	}
	before := src.calls
	l, err := a.Lease(ctx, 0, a.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if off := checkPattern(a, 0, l.Bytes()); off >= 0 {
		t.Errorf("byte %d differs", off)
	}
	l.Release()
	if src.calls-before != 2 || u.Faults() != 2 {
		t.Errorf("re-hydrated %d, faults %d; want 2 and 2 (no double count)", src.calls-before, u.Faults())
	}
}

func TestRunReconcilerStops(t *testing.T) {
	u := newTestUMA(t, testConfig())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- u.RunReconciler(ctx, time.Millisecond) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("RunReconciler returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunReconciler did not stop")
	}
}

func TestMarkPreemptibleThrottledByFaultRate(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.MaxFaultsPerSecond = 0.5
	u := newTestUMA(t, cfg)
	now := int64(100e9)
	u.clock = func() int64 { return now }
	var src patternRehydrate
	a, err := u.NewArena("thr", 2*u.ChunkSize(), ArenaOptions{Rehydrate: src.fn})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Hydrate(ctx, 0, a.Size()); err != nil {
		t.Fatal(err)
	}
	for range 29 { // 29 faults in the last minute: 0.48/s
		u.rate.add(now)
	}
	if res, err := a.MarkPreemptible(ctx, 0.5); err != nil || res.Throttled || res.Marked != 1 {
		t.Fatalf("below the limit: %+v, %v", res, err)
	}
	u.rate.add(now) // 30 faults: 0.5/s
	if res, err := a.MarkPreemptible(ctx, 1); err != nil || !res.Throttled || res.Marked != 0 {
		t.Fatalf("at the limit: %+v, %v", res, err)
	}
	now += 61e9 // a minute later the faults have aged out
	if res, err := a.MarkPreemptible(ctx, 1); err != nil || res.Throttled || res.Marked != 1 {
		t.Fatalf("after a quiet minute: %+v, %v", res, err)
	}
}

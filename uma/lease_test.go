package uma

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

func TestByteLeaseBudgetAndRefcount(t *testing.T) {
	ctx := context.Background()
	var logs logBuffer
	cfg := testConfig()
	cfg.Logger = logs.logger()
	u := newTestUMA(t, cfg)
	a, err := u.NewArena("a", 4*u.ChunkSize(), ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := newTestBudget(1 << 30)
	cs := u.ChunkSize()
	l, err := a.Lease(ctx, cs/2, cs, b) // straddles chunks 0 and 1
	if err != nil {
		t.Fatal(err)
	}
	if b.InUse() != cs {
		t.Fatalf("budget in use %d after Lease, want %d", b.InUse(), cs)
	}
	if l.Len() != int(cs) || l.Offset() != cs/2 || len(l.Bytes()) != int(cs) || l.Arena() != a {
		t.Fatalf("lease shape: len %d off %d", l.Len(), l.Offset())
	}
	snap := u.Snapshot().Arenas[0].Chunks
	if snap[0].Refs != 1 || snap[1].Refs != 1 || snap[2].Refs != 0 {
		t.Fatalf("refs = %d %d %d, want 1 1 0", snap[0].Refs, snap[1].Refs, snap[2].Refs)
	}
	l.Retain()
	l.Release()
	if b.InUse() != cs || u.Outstanding().Bytes != 1 {
		t.Fatal("first of two releases returned the lease")
	}
	l.Release()
	if b.InUse() != 0 || u.Outstanding().Bytes != 0 {
		t.Fatalf("last release: budget %d, outstanding %+v", b.InUse(), u.Outstanding())
	}
	l.Release() // over-release: logged, ignored
	if b.InUse() != 0 || logs.count("released more often") != 1 {
		t.Fatalf("over-release: budget %d, log %q", b.InUse(), logs.buf.String())
	}
	if err := u.CheckNoLeases(); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseBudgetCancelled(t *testing.T) {
	u := newTestUMA(t, testConfig())
	a, err := u.NewArena("a", u.ChunkSize(), ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := newTestBudget(100)
	hold, err := a.Lease(context.Background(), 0, 100, b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Lease(ctx, 0, 10, b); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `arena "a"`) {
		t.Fatalf("lease over a full budget with a cancelled context: %v", err)
	}
	hold.Release()
	if b.InUse() != 0 {
		t.Fatalf("budget in use %d", b.InUse())
	}
}

func TestLeaseRangeErrors(t *testing.T) {
	u := newTestUMA(t, testConfig())
	a, err := u.NewArena("a", 1000, ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, r := range []struct{ off, n int64 }{{-1, 10}, {0, 0}, {990, 11}, {1000, 1}} {
		if _, err := a.Lease(context.Background(), r.off, r.n, nil); err == nil {
			t.Errorf("Lease(%d, %d) succeeded", r.off, r.n)
		}
	}
	if _, err := u.NewArena("a", 10, ArenaOptions{}); err == nil {
		t.Error("duplicate arena name accepted")
	}
	if _, err := u.NewArena("b", 10, ArenaOptions{ChunkSize: 1000}); err == nil {
		t.Error("chunk size not a page multiple accepted")
	}
}

func TestStableLeaseTierBudget(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	cfg.StableBytes = 3 * cfg.ChunkSize
	u := newTestUMA(t, cfg)
	var src patternRehydrate
	a, err := u.NewArena("s", 6*u.ChunkSize(), ArenaOptions{Rehydrate: src.fn})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	cs := u.ChunkSize()
	s1, err := a.AcquireStable(ctx, 0, 2*cs) // chunks 0,1 (re-hydrated: they start EVICTED)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := a.AcquireStable(ctx, cs, cs) // chunk 1 again: no new bytes
	if err != nil {
		t.Fatal(err)
	}
	v := u.Snapshot().Version
	_, err = a.AcquireStable(ctx, 2*cs, 2*cs) // chunks 2,3: 2 more, only 1 fits
	var sbe *StableBudgetError
	if !errors.As(err, &sbe) || !errors.Is(err, ErrStableBudget) {
		t.Fatalf("over the tier: %v, want *StableBudgetError", err)
	}
	if sbe.Need != 2*cs || sbe.Used != 2*cs || sbe.Capacity != 3*cs || sbe.First != 2 || sbe.Last != 3 {
		t.Errorf("refusal numbers: %+v", sbe)
	}
	snap := u.Snapshot()
	if snap.Version != v {
		t.Errorf("refusal moved the ledger version from %d to %d", v, snap.Version)
	}
	if snap.StableUsed != 2*cs || snap.Arenas[0].Chunks[0].State != Stable || snap.Arenas[0].Chunks[1].Stables != 2 {
		t.Errorf("ledger after refusal: used %d, chunk0 %v, chunk1 stables %d", snap.StableUsed, snap.Arenas[0].Chunks[0].State, snap.Arenas[0].Chunks[1].Stables)
	}
	// Stable chunks are skipped by preemption and eviction.
	if err := a.Hydrate(ctx, 0, a.Size()); err != nil {
		t.Fatal(err)
	}
	res, err := a.MarkPreemptible(ctx, 1)
	if err != nil || res.Marked != 4 || res.Skipped != 2 {
		t.Fatalf("MarkPreemptible over stable chunks: %+v, %v", res, err)
	}
	if n, err := a.EvictTail(a.Size()); err != nil || n != 4*cs {
		t.Fatalf("EvictTail over stable chunks evicted %d, %v", n, err)
	}
	s1.Release()
	s1.Release() // ignored
	if st := u.Snapshot().Arenas[0].Chunks; st[0].State != Hot || st[1].State != Stable {
		t.Errorf("after one release: %v %v, want HOT STABLE", st[0].State, st[1].State)
	}
	s2.Release()
	if snap := u.Snapshot(); snap.StableUsed != 0 || snap.Leases.Stables != 0 {
		t.Errorf("after all releases: used %d leases %d", snap.StableUsed, snap.Leases.Stables)
	}
}

func TestPinLease(t *testing.T) {
	tests := []struct {
		name      string
		mlockErr  error
		wantLock  bool
		wantWarns int
	}{
		{"mlock works", nil, true, 0},
		{"EPERM disables mlock", unix.EPERM, false, 1},
		{"ENOMEM disables mlock", unix.ENOMEM, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.mlockErr == nil {
				probe := make([]byte, 4096)
				if err := defaultKernel().mlock(probe); err != nil {
					t.Skipf("the kernel refuses mlock to this process: %v", err)
				}
				_ = defaultKernel().munlock(probe)
			}
			var logs logBuffer
			fk := &faultKernel{kernel: defaultKernel(), mlockErr: tt.mlockErr}
			cfg := testConfig()
			cfg.kernel, cfg.Logger = fk, logs.logger()
			u := newTestUMA(t, cfg)
			a, err := u.NewArena("p", 4*u.ChunkSize(), ArenaOptions{PreemptWithoutSource: true})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			p1, err := a.Pin(ctx, 0, 2*u.ChunkSize())
			if err != nil {
				t.Fatal(err)
			}
			p2, err := a.Pin(ctx, u.ChunkSize(), 2*u.ChunkSize())
			if err != nil {
				t.Fatal(err)
			}
			c := u.Snapshot().Arenas[0].Chunks
			if c[1].Pins != 2 || c[0].Pins != 1 || c[2].Pins != 1 || c[0].Mlocked != tt.wantLock {
				t.Fatalf("pins %d %d %d mlocked %v", c[0].Pins, c[1].Pins, c[2].Pins, c[0].Mlocked)
			}
			if u.MlockEnabled() != tt.wantLock {
				t.Errorf("MlockEnabled = %v", u.MlockEnabled())
			}
			if got := logs.count("mlock refused"); got != tt.wantWarns {
				t.Errorf("mlock warnings logged: %d, want %d", got, tt.wantWarns)
			}
			if tt.mlockErr != nil && fk.mlockCalls != 1 {
				t.Errorf("mlock called %d times after it failed, want 1", fk.mlockCalls)
			}
			// Pinned chunks are never preempted.
			res, err := a.MarkPreemptible(ctx, 1)
			if err != nil || res.Marked != 1 {
				t.Errorf("MarkPreemptible with 3 of 4 chunks pinned: %+v %v", res, err)
			}
			p1.Release()
			p2.Release()
			p2.Release()
			c = u.Snapshot().Arenas[0].Chunks
			if c[1].Pins != 0 || c[1].Mlocked {
				t.Errorf("after release: pins %d mlocked %v", c[1].Pins, c[1].Mlocked)
			}
		})
	}
}

func TestTransferLifecycle(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	u := newTestUMA(t, cfg)
	a, err := u.NewArena("t", 2*u.ChunkSize(), ArenaOptions{Policy: PolicyMarkPreemptible, PreemptWithoutSource: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	writePattern(t, a)
	tx, err := a.BeginTransfer(ctx, 0, a.Size())
	if err != nil {
		t.Fatal(err)
	}
	if off := checkPattern(a, 0, tx.Bytes()); off >= 0 {
		t.Fatalf("transfer bytes differ at %d", off)
	}
	if c := u.Snapshot().Arenas[0].Chunks[0]; c.State != LockedTx {
		t.Fatalf("during transfer: %s", c.State)
	}
	if err := a.Write(ctx, 0, []byte{1}); !errors.Is(err, ErrLeased) {
		t.Errorf("write during transfer: %v", err)
	}
	if res, _ := a.MarkPreemptible(ctx, 1); res.Marked != 0 {
		t.Errorf("marked %d LOCKED_TX chunks", res.Marked)
	}
	if err := a.Close(); !errors.Is(err, ErrLeased) {
		t.Errorf("close during transfer: %v", err)
	}
	tx.Done(true)
	tx.Release() // after Done: ignored
	if c := u.Snapshot().Arenas[0].Chunks[0]; c.State != CopiedGPU {
		t.Fatalf("after transfer: %s", c.State)
	}
	p, err := a.PostGPULoad(ctx)
	if err != nil || p != PolicyMarkPreemptible {
		t.Fatal(p, err)
	}
	if s := u.Snapshot(); s.States[Preemptible] != 2 || s.PreemptibleMarked != 2*u.ChunkSize() {
		t.Errorf("after MarkPreemptible policy: %v", s.States)
	}
	// Abort path: a dropped transfer leaves the chunks HOT.
	tx2, err := a.BeginTransfer(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	tx2.Release()
	if c := u.Snapshot().Arenas[0].Chunks[0]; c.State != Hot {
		t.Errorf("after aborted transfer: %s", c.State)
	}
}

func TestPostGPULoadPolicies(t *testing.T) {
	tests := []struct {
		policy    Policy
		disabled  bool
		want      Policy
		wantState State
	}{
		{PolicyEvictCPU, false, PolicyEvictCPU, Evicted},
		{PolicyMarkPreemptible, false, PolicyMarkPreemptible, Preemptible},
		{PolicyKeep, false, PolicyKeep, CopiedGPU},
		{PolicyEvictCPU, true, PolicyKeep, CopiedGPU},
		{PolicyMarkPreemptible, true, PolicyKeep, CopiedGPU},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/disabled=%v", tt.policy, tt.disabled), func(t *testing.T) {
			ctx := context.Background()
			cfg := testConfig()
			cfg.DisablePreemptible = tt.disabled
			u := newTestUMA(t, cfg)
			var src patternRehydrate
			a, err := u.NewArena("r", 3*u.ChunkSize(), ArenaOptions{Rehydrate: src.fn})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			a.SetPolicy(tt.policy)
			tx, err := a.BeginTransfer(ctx, 0, a.Size())
			if err != nil {
				t.Fatal(err)
			}
			tx.Done(true)
			got, err := a.PostGPULoad(ctx)
			if err != nil || got != tt.want {
				t.Fatalf("PostGPULoad = %s, %v; want %s", got, err, tt.want)
			}
			if s := u.Snapshot(); s.States[tt.wantState] != 3 {
				t.Errorf("states %v, want 3 %s", s.States, tt.wantState)
			}
			// Whatever happened, the bytes come back intact.
			l, err := a.Lease(ctx, 0, a.Size(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release()
			if off := checkPattern(a, 0, l.Bytes()); off >= 0 {
				t.Errorf("byte %d differs", off)
			}
		})
	}
}

func TestMarkPreemptibleColdestFirst(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	var src patternRehydrate
	a, err := u.NewArena("heat", 8*u.ChunkSize(), ArenaOptions{Rehydrate: src.fn})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Hydrate(ctx, 0, a.Size()); err != nil {
		t.Fatal(err)
	}
	cs := u.ChunkSize()
	var tick int64
	u.clock = func() int64 { tick++; return tick } // distinct, ordered readings
	// Access order makes chunks 6 and 3 the coldest, then 0.
	for _, i := range []int{6, 3, 0, 1, 2, 4, 5, 7} {
		if err := a.RecordAccess(int64(i)*cs, 1); err != nil {
			t.Fatal(err)
		}
	}
	// Chunk 6 is leased, chunk 3 pinned: the coldest eligible are 0 and 1.
	l, err := a.Lease(ctx, 6*cs, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Pin(ctx, 3*cs, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Re-record access order after taking leases (leasing touches).
	for _, i := range []int{0, 1, 2, 4, 5, 7} {
		_ = a.RecordAccess(int64(i)*cs, 1)
	}
	res, err := a.MarkPreemptible(ctx, 0.25)
	if err != nil || res.Marked != 2 {
		t.Fatalf("MarkPreemptible(0.25) = %+v, %v", res, err)
	}
	var marked []int
	for _, c := range u.Snapshot().Arenas[0].Chunks {
		if c.State == Preemptible {
			marked = append(marked, c.ID.Index)
		}
	}
	if fmt.Sprint(marked) != "[0 1]" {
		t.Errorf("marked chunks %v, want the coldest eligible [0 1]", marked)
	}
	// Idempotent: the ratio counts chunks already preemptible.
	if res, _ := a.MarkPreemptible(ctx, 0.25); res.Marked != 0 {
		t.Errorf("second MarkPreemptible(0.25) marked %d more", res.Marked)
	}
	l.Release()
	p.Release()
	if _, err := a.MarkPreemptible(ctx, 1.5); err == nil {
		t.Error("ratio 1.5 accepted")
	}
}

func TestCoolAndEvictTail(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	a, err := u.NewArena("c", 4*u.ChunkSize(), ArenaOptions{PreemptWithoutSource: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if n := a.Cool(0); n != 4 {
		t.Fatalf("Cool(0) moved %d chunks, want 4", n)
	}
	if n := a.Cool(time.Hour); n != 0 {
		t.Fatalf("Cool(1h) moved %d", n)
	}
	if err := a.RecordAccess(0, 1); err != nil {
		t.Fatal(err)
	}
	n, err := a.EvictTail(u.ChunkSize() + 1) // two chunks from the tail
	if err != nil || n != 2*u.ChunkSize() {
		t.Fatalf("EvictTail = %d, %v", n, err)
	}
	c := u.Snapshot().Arenas[0].Chunks
	got := fmt.Sprint(c[0].State, c[1].State, c[2].State, c[3].State)
	if got != "HOT COLD EVICTED EVICTED" {
		t.Errorf("states %s", got)
	}
	// Without a re-hydrate function, evicted bytes cannot be served.
	if _, err := a.Lease(ctx, 3*u.ChunkSize(), 1, nil); !errors.Is(err, ErrNoRehydrate) {
		t.Errorf("lease of an evicted chunk without source: %v", err)
	}
	// A write that covers the chunk restores it without a source.
	if err := a.Write(ctx, 3*u.ChunkSize(), make([]byte, u.ChunkSize())); err != nil {
		t.Fatal(err)
	}
	if c := u.Snapshot().Arenas[0].Chunks[3]; c.State != Hot {
		t.Errorf("after a covering write: %s", c.State)
	}
}

func TestReclaimedWithoutSource(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	safe, err := u.NewArena("safe", 2*u.ChunkSize(), ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer safe.Close()
	// By default chunks without a source are never preempted or evicted.
	if res, err := safe.MarkPreemptible(ctx, 1); err != nil || res.Marked != 0 || res.NoSource != 2 {
		t.Fatalf("MarkPreemptible without a source: %+v, %v", res, err)
	}
	if n, err := safe.EvictTail(safe.Size()); err != nil || n != 0 {
		t.Fatalf("EvictTail without a source evicted %d, %v", n, err)
	}
	a, err := u.NewArena("nosrc", 2*u.ChunkSize(), ArenaOptions{PreemptWithoutSource: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	writePattern(t, a)
	if res, err := a.MarkPreemptible(ctx, 1); err != nil || res.Marked != 2 {
		t.Fatal(res, err)
	}
	// Chunk 1 untouched by the kernel comes back verified.
	l, err := a.Lease(ctx, u.ChunkSize(), u.ChunkSize(), nil)
	if err != nil {
		t.Fatalf("intact preemptible chunk: %v", err)
	}
	l.Release()
	takeByKernel(t, u, a.span(0))
	b := newTestBudget(1 << 30)
	_, err = a.Lease(ctx, 0, 10, b)
	if !errors.Is(err, ErrNoRehydrate) || !strings.Contains(err.Error(), "nosrc#0") {
		t.Fatalf("reclaimed chunk without source: %v", err)
	}
	if b.InUse() != 0 {
		t.Errorf("failed lease kept %d budget bytes", b.InUse())
	}
	if c := u.Snapshot().Arenas[0].Chunks[0]; c.State != Evicted {
		t.Errorf("state %s, want EVICTED", c.State)
	}
	if u.Faults() != 1 {
		t.Errorf("faults %d, want 1", u.Faults())
	}
}

func TestRehydrateMismatchIsAnError(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	flip := false
	a, err := u.NewArena("m", u.ChunkSize(), ArenaOptions{Rehydrate: func(ctx context.Context, id ChunkID, dst []byte) error {
		fillPattern(id, dst)
		if flip {
			dst[100] ^= 0xff // the source changed
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.MarkPreemptible(ctx, 1); err != nil { // EVICTED chunks are skipped
		t.Fatal(err)
	}
	if err := a.Hydrate(ctx, 0, a.Size()); err != nil {
		t.Fatal(err)
	}
	if res, err := a.MarkPreemptible(ctx, 1); err != nil || res.Marked != 1 {
		t.Fatal(res, err)
	}
	takeByKernel(t, u, a.span(0))
	flip = true
	if _, err := a.Lease(ctx, 0, 1, nil); err == nil || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("re-hydrated bytes that differ were accepted: %v", err)
	}
}

func TestMadvFreeFallback(t *testing.T) {
	ctx := context.Background()
	var logs logBuffer
	fk := &faultKernel{kernel: defaultKernel(), freeErr: unix.EINVAL}
	cfg := testConfig()
	cfg.kernel, cfg.Logger = fk, logs.logger()
	u := newTestUMA(t, cfg)
	var src patternRehydrate
	a, err := u.NewArena("f", 4*u.ChunkSize(), ArenaOptions{Rehydrate: src.fn})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Hydrate(ctx, 0, a.Size()); err != nil {
		t.Fatal(err)
	}
	res, err := a.MarkPreemptible(ctx, 1)
	if err != nil || res.Evicted != 4 || res.Marked != 0 {
		t.Fatalf("MarkPreemptible with MADV_FREE refused: %+v, %v", res, err)
	}
	if logs.count("MADV_FREE refused") != 1 {
		t.Errorf("fallback logged %d times, want once", logs.count("MADV_FREE refused"))
	}
	l, err := a.Lease(ctx, 0, a.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if off := checkPattern(a, 0, l.Bytes()); off >= 0 {
		t.Errorf("byte %d differs after the MADV_DONTNEED fallback", off)
	}
	if src.calls != 8 {
		t.Errorf("re-hydrated %d times, want 4 + 4", src.calls)
	}
	// A madvise error other than EINVAL is returned and leaves chunks HOT.
	fk.mu.Lock()
	fk.freeErr = unix.EIO
	fk.mu.Unlock()
	u.freeOff.Store(false)
	a2, err := u.NewArena("f2", u.ChunkSize(), ArenaOptions{PreemptWithoutSource: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if _, err := a2.MarkPreemptible(ctx, 1); !errors.Is(err, unix.EIO) || !strings.Contains(err.Error(), "f2#0") {
		t.Errorf("madvise EIO: %v", err)
	}
	for _, ar := range u.Snapshot().Arenas {
		if ar.Name == "f2" && ar.Chunks[0].State != Hot {
			t.Errorf("f2#0 after failed madvise: %s, want HOT", ar.Chunks[0].State)
		}
	}
}

// TestLeasesConcurrent runs every kind of lease against preemption and
// eviction from many goroutines (run it with -race). Every byte handed out
// is checked against the source.
func TestLeasesConcurrent(t *testing.T) {
	cfg := testConfig()
	cfg.StableBytes = 4 * cfg.ChunkSize
	u := newTestUMA(t, cfg)
	var src atomicRehydrate
	a, err := u.NewArena("conc", 16*u.ChunkSize()-100, ArenaOptions{Rehydrate: src.fn})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	pool, err := u.NewPool("conc-pool", 8*u.ChunkSize(), ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	budget := newTestBudget(4 * u.ChunkSize())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	const workers, iters = 6, 150
	for w := range workers {
		g.Go(func() error {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for it := range iters {
				off := r.Int64N(a.Size() - 1)
				n := 1 + r.Int64N(min(a.Size()-off, 3*u.ChunkSize()))
				switch (w + it) % 6 {
				case 0, 1:
					l, err := a.Lease(ctx, off, n, budget)
					if err != nil {
						return err
					}
					l.Retain()
					bad := checkPattern(a, off, l.Bytes())
					l.Release()
					l.Release()
					if bad >= 0 {
						return fmt.Errorf("byte lease served a wrong byte at %d", bad)
					}
				case 2:
					p, err := a.Pin(ctx, off, n)
					if err != nil {
						return err
					}
					bad := checkPattern(a, off, p.Bytes())
					p.Release()
					if bad >= 0 {
						return fmt.Errorf("pin served a wrong byte at %d", bad)
					}
				case 3:
					s, err := a.AcquireStable(ctx, off, min(n, u.ChunkSize()))
					if errors.Is(err, ErrStableBudget) {
						continue
					}
					if err != nil {
						return err
					}
					s.Release()
				case 4:
					if _, err := a.MarkPreemptible(ctx, r.Float64()); err != nil {
						return err
					}
					if r.IntN(3) == 0 {
						if _, err := a.EvictTail(r.Int64N(4 * u.ChunkSize())); err != nil {
							return err
						}
					}
				case 5:
					l, err := pool.Alloc(ctx, int(1+r.Int64N(2*u.ChunkSize())), budget)
					if err != nil {
						return err
					}
					for _, c := range l.Bytes() {
						if c != 0 {
							return errors.New("pool allocation not zeroed")
						}
					}
					l.Bytes()[0] = 1
					if r.IntN(4) == 0 {
						if _, err := u.Shed(u.ChunkSize()); err != nil {
							return err
						}
					}
					l.Release()
				}
			}
			return nil
		})
	}
	// The "kernel": reclaims lazily freed pages of random chunks at random
	// moments, also in the middle of a re-acquire. MADV_PAGEOUT affects only
	// pages still lazily freed (no swap), so it never touches bytes in use.
	stop := make(chan struct{})
	kdone := make(chan struct{})
	go func() {
		defer close(kdone)
		r := rand.New(rand.NewPCG(99, 1))
		for {
			select {
			case <-stop:
				return
			default:
			}
			i := r.IntN(a.Chunks())
			_ = u.k.madvise(a.span(i), advisePageout)
		}
	}()
	err = g.Wait()
	close(stop)
	<-kdone
	if err != nil {
		t.Fatal(err)
	}
	if err := u.CheckNoLeases(); err != nil {
		t.Fatal(err)
	}
	s := u.Snapshot()
	if s.StableUsed != 0 || budget.InUse() != 0 || pool.InUse() != 0 {
		t.Fatalf("left over: stable %d budget %d pool %d", s.StableUsed, budget.InUse(), pool.InUse())
	}
	for _, ar := range s.Arenas {
		for _, c := range ar.Chunks {
			if c.Refs != 0 || c.Pins != 0 || c.Stables != 0 || c.Mlocked {
				t.Errorf("chunk %s left with %+v", c.ID, c)
			}
		}
	}
	t.Logf("faults %d, re-hydrations %d, ledger version %d", u.Faults(), u.Rehydrations(), s.Version)
}

// TestPipelineLeavesNoLeases runs a small source → stage → sink pipeline
// over leases (the way flow graphs use them) that ends, fails or is
// cancelled, and checks the ledger holds no lease afterwards.
func TestPipelineLeavesNoLeases(t *testing.T) {
	tests := []struct {
		name    string
		failAt  int // stage fails on this element (-1: never)
		cancelN int // cancel the pipeline after this many sunk elements (-1: never)
		wantErr bool
	}{
		{"ends", -1, -1, false},
		{"fails", 17, -1, true},
		{"cancelled", -1, 9, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newTestUMA(t, testConfig())
			var src atomicRehydrate
			a, err := u.NewArena("pipe", 16*u.ChunkSize(), ArenaOptions{Rehydrate: src.fn})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			pool, err := u.NewPool("pipe-pool", 4*u.ChunkSize(), ArenaOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			budget := newTestBudget(3 * u.ChunkSize())
			err = runPipeline(context.Background(), a, pool, budget, tt.failAt, tt.cancelN)
			if (err != nil) != tt.wantErr {
				t.Fatalf("pipeline error %v, want error %v", err, tt.wantErr)
			}
			if err := u.CheckNoLeases(); err != nil {
				t.Fatalf("after the pipeline: %v", err)
			}
			if budget.InUse() != 0 || pool.InUse() != 0 {
				t.Fatalf("budget %d and pool %d bytes still in use", budget.InUse(), pool.InUse())
			}
		})
	}
}

type element struct {
	in  *ByteLease // leased from the artifact
	out *ByteLease // allocated from the pool
}

func (e element) Release() {
	if e.in != nil {
		e.in.Release()
	}
	if e.out != nil {
		e.out.Release()
	}
}

func runPipeline(parent context.Context, a *Arena, pool *Pool, budget Budget, failAt, cancelN int) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	q1 := make(chan element, 2)
	q2 := make(chan element, 2)
	cs := a.ChunkSize()
	// Release what is left in a queue once its producer is gone.
	drain := func(q chan element) {
		for e := range q {
			e.Release()
		}
	}
	g.Go(func() error { // source
		defer close(q1)
		for k := 0; k < 40; k++ {
			off := int64(k%16) * cs
			l, err := a.Lease(ctx, off, cs/2, budget)
			if err != nil {
				return err
			}
			select {
			case q1 <- element{in: l}:
			case <-ctx.Done():
				l.Release()
				return ctx.Err()
			}
		}
		return nil
	})
	g.Go(func() error { // decode stage: copies into a pool buffer
		defer close(q2)
		defer drain(q1)
		k := 0
		for e := range q1 {
			if k == failAt {
				e.Release()
				return fmt.Errorf("stage decode: element %d: injected failure", k)
			}
			k++
			out, err := pool.Alloc(ctx, e.in.Len(), budget)
			if err != nil {
				e.Release()
				return err
			}
			copy(out.Bytes(), e.in.Bytes())
			e.in.Release()
			e.in = nil
			e.out = out
			select {
			case q2 <- e:
			case <-ctx.Done():
				e.Release()
				return ctx.Err()
			}
		}
		return nil
	})
	g.Go(func() error { // sink
		defer drain(q2)
		n := 0
		for e := range q2 {
			e.Release()
			n++
			if n == cancelN {
				cancel()
				return context.Canceled
			}
		}
		return nil
	})
	return g.Wait()
}

func TestPool(t *testing.T) {
	ctx := context.Background()
	u := newTestUMA(t, testConfig())
	p, err := u.NewPool("pool", 2*u.ChunkSize(), ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l1, err := p.Alloc(ctx, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	l1.Bytes()[0] = 9
	raw, err := p.AllocBytes(int(u.ChunkSize()))
	if err != nil {
		t.Fatal(err)
	}
	if uintptr(unsafeAddr(raw))%poolAlign != 0 || uintptr(unsafeAddr(l1.Bytes()))%poolAlign != 0 {
		t.Error("allocation not 64-byte aligned")
	}
	if _, err := p.AllocBytes(int(u.ChunkSize())); !errors.Is(err, ErrPoolFull) {
		t.Errorf("over-allocation: %v", err)
	}
	// A blocked Alloc proceeds when memory is freed.
	done := make(chan error, 1)
	go func() {
		l, err := p.Alloc(ctx, int(u.ChunkSize()), nil)
		if err == nil {
			l.Release()
		}
		done <- err
	}()
	// Wait until the goroutine is blocked on the full pool, then free.
	for deadline := time.Now().Add(10 * time.Second); ; {
		u.mu.Lock()
		waiting := p.wait != nil
		u.mu.Unlock()
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Alloc on a full pool did not wait")
		}
		runtime.Gosched()
	}
	if err := p.FreeBytes(raw); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := p.FreeBytes(raw); err == nil {
		t.Error("double free accepted")
	}
	if err := p.FreeBytes(make([]byte, 10)); err == nil {
		t.Error("free of foreign memory accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Alloc(cctx, int(2*u.ChunkSize()), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Alloc on a full pool with a cancelled context: %v", err)
	}
	l1.Release()
	if n, err := p.Trim(); err != nil || n != 2*u.ChunkSize() {
		t.Fatalf("Trim = %d, %v", n, err)
	}
	if s := u.Snapshot(); s.States[Evicted] != 2 || !s.Arenas[0].Pool {
		t.Errorf("after trim: %v", s.States)
	}
	l2, err := p.Alloc(ctx, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Bytes()[0] != 0 {
		t.Error("re-allocated trimmed memory not zeroed")
	}
	l2.Release()
}

func TestRegisteredPoolIsNeverTrimmed(t *testing.T) {
	u := newTestUMA(t, testConfig())
	plain, err := u.NewPool("plain", 4*u.ChunkSize(), ArenaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Region(); err == nil {
		t.Fatal("a pool that may be trimmed handed out its region for registration")
	}
	reg, err := u.NewPool("registered", 4*u.ChunkSize(), ArenaOptions{Registered: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	region, err := reg.Region()
	if err != nil || int64(len(region)) != 4*u.ChunkSize() {
		t.Fatalf("Region() = %d bytes, %v", len(region), err)
	}
	l, err := reg.Alloc(context.Background(), 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := l.Bytes()
	if unsafeAddr(b) < unsafeAddr(region) || unsafeAddr(b)+uintptr(len(b)) > unsafeAddr(region)+uintptr(len(region)) {
		t.Fatal("allocation lies outside the registered region")
	}
	copy(b, "kept")
	l.Release()
	if n, err := reg.Trim(); n != 0 || err != nil {
		t.Fatalf("registered pool trimmed %d bytes (%v)", n, err)
	}
	if n, err := plain.Trim(); n == 0 || err != nil {
		t.Fatalf("plain pool trimmed %d bytes (%v): the control case did not trim", n, err)
	}
	if string(region[:4]) != "kept" {
		t.Fatalf("registered memory changed: %q", region[:4])
	}
	if _, err := u.NewPool("bad", u.ChunkSize(), ArenaOptions{Registered: true, PreemptWithoutSource: true}); err == nil {
		t.Fatal("a registered pool accepted PreemptWithoutSource")
	}
	if _, err := u.NewArena("bad-arena", u.ChunkSize(), ArenaOptions{Registered: true}); err == nil {
		t.Fatal("an arena accepted Registered")
	}
}

// TestUnregisteredPoolReleasesFreeChunks: once Unregister says nothing registered
// writes into its free chunks, a registered pool gives them back like any pool
// (a paused loader returning its read pool), keeps what is leased, and no longer
// hands out its region.
func TestUnregisteredPoolReleasesFreeChunks(t *testing.T) {
	u := newTestUMA(t, testConfig())
	cs := u.ChunkSize()
	reg, err := u.NewPool("registered", 4*cs, ArenaOptions{Registered: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	held, err := reg.Alloc(context.Background(), int(cs), nil)
	if err != nil {
		t.Fatal(err)
	}
	copy(held.Bytes(), "held")
	l, err := reg.Alloc(context.Background(), int(2*cs), nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if n, err := reg.ReleaseFree(); n != 0 || err != nil {
		t.Fatalf("registered pool released %d bytes (%v) before Unregister", n, err)
	}
	if !reg.Unregister() {
		t.Fatal("Unregister of a registered pool reported it was not registered")
	}
	if reg.Unregister() {
		t.Fatal("a second Unregister reported the pool registered")
	}
	if _, err := reg.Region(); err == nil {
		t.Fatal("an unregistered pool handed out its region for registration")
	}
	n, err := reg.ReleaseFree()
	if err != nil || n != 3*cs {
		t.Fatalf("ReleaseFree after Unregister = %d, %v; want the 3 free chunks (%d bytes)", n, err, 3*cs)
	}
	if string(held.Bytes()[:4]) != "held" {
		t.Fatalf("the leased chunk changed: %q", held.Bytes()[:4])
	}
	held.Release()
}

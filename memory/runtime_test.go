package memory

import (
	"context"
	"errors"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/pressure"
	"github.com/psiflow/psiflow/uma"
)

const mib = 1 << 20

func TestWorkersNarrowBoundsConcurrency(t *testing.T) {
	w, err := NewWorkers(4)
	if err != nil {
		t.Fatal(err)
	}
	w.SetLimit(2)
	var cur, peak atomic.Int64
	g := flow.New("narrow")
	src := flow.FromSlice(g, "src", make([]int, 200))
	held := flow.Via(src, Narrow[int]("narrow", w))
	// The graph releases each Held (and with it the slot) when the function returns.
	work := flow.Map(held, "work", 4, func(ctx context.Context, h *Held[int]) (int, error) {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(200 * time.Microsecond)
		cur.Add(-1)
		return 0, nil
	})
	flow.Sink(work, "sink", func(context.Context, int) error { return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p > 2 || p < 1 {
		t.Fatalf("peak concurrency %d with a limit of 2 (4 workers)", p)
	}
	if w.InUse() != 0 {
		t.Fatalf("%d slots still held", w.InUse())
	}
	if _, err := NewWorkers(0); err == nil {
		t.Fatal("NewWorkers(0) accepted")
	}
}

func TestWorkersEnterWaitsAndWakes(t *testing.T) {
	w, _ := NewWorkers(2)
	w.SetLimit(1)
	ctx := context.Background()
	if err := w.Enter(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- w.Enter(ctx) }()
	select {
	case err := <-got:
		t.Fatalf("second Enter passed a limit of 1: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	w.SetLimit(2) // restore: the waiter enters
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.Enter(cctx); err == nil {
		t.Fatal("Enter above the limit with a cancelled context succeeded")
	}
	w.Leave()
	w.Leave()
	if w.SetLimit(99); w.Limit() != 2 {
		t.Fatalf("limit %d, want it kept at the max 2", w.Limit())
	}
}

func newTestUMA(t *testing.T) *uma.UMA {
	t.Helper()
	u, err := uma.New(uma.Config{ChunkSize: 256 << 10, MemoryLimit: func() (int64, string, error) { return 1 << 30, "test", nil }})
	if err != nil {
		t.Skipf("no UMA here: %v", err)
	}
	t.Cleanup(func() {
		if err := u.Close(); err != nil {
			t.Error(err)
		}
	})
	return u
}

func TestReadBuffersSpillAndShrink(t *testing.T) {
	u := newTestUMA(t)
	rb, err := newReadBuffers(u, 2*mib, 8*mib)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	regions := rb.Regions()
	if len(regions) != 1 || len(regions[0]) != 2*mib {
		t.Fatalf("regions %d, want one of 2 MiB", len(regions))
	}
	inside := func(b []byte) bool {
		r := regions[0]
		return &b[0] == &r[0] || (uintptrOf(b) >= uintptrOf(r) && uintptrOf(b) < uintptrOf(r)+uintptr(len(r)))
	}
	ctx := context.Background()
	a, err := rb.Alloc(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Bytes()) != 1000 || !inside(a.Bytes()) {
		t.Fatal("first buffer not from the registered pool")
	}
	big, err := rb.Alloc(ctx, 3*mib) // larger than the registered pool: spill
	if err != nil {
		t.Fatal(err)
	}
	if inside(big.Bytes()) || rb.Spilled() != 1 {
		t.Fatalf("a 3 MiB buffer came from the 2 MiB registered pool (spilled %d)", rb.Spilled())
	}
	rb.SetPressure(true)
	p, err := rb.Alloc(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if inside(p.Bytes()) {
		t.Fatal("under pressure a buffer came from the registered pool")
	}
	big.Release()
	p.Release()
	if n, err := rb.ReleaseSpill(); err != nil || n < 3*mib {
		t.Fatalf("ReleaseSpill = %d, %v; want at least 3 MiB back", n, err)
	}
	if _, err := rb.NextEpoch(); err == nil {
		t.Fatal("NextEpoch with a registered buffer still leased succeeded")
	}
	a.Release()
	rb.SetPressure(false)
	// The failed attempt above closed nothing; the pressure of this epoch halves the pool.
	rb.pressed.Store(true)
	if d, err := rb.NextEpoch(); err != nil || d != 1*mib || rb.Registered() != 1*mib {
		t.Fatalf("NextEpoch after pressure = %d, %v (registered %d); want 1 MiB unregistered", d, err, rb.Registered())
	}
	if d, err := rb.NextEpoch(); err != nil || d != -1*mib || rb.Registered() != 2*mib {
		t.Fatalf("NextEpoch without pressure = %d, %v (registered %d); want back to 2 MiB", d, err, rb.Registered())
	}
}

// fakeMemory is a headroom reader whose co-tenant the test moves.
type fakeMemory struct {
	mu     sync.Mutex
	others int64
	self   int64 // 0: 10 MiB
	limit  int64 // 0: 256 MiB
	at     time.Time
	reads  int
}

// advance moves the fake clock by d and returns it.
func (f *fakeMemory) advance(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = f.at.Add(d)
	return f.at
}

// samples is how many samples were read so far.
func (f *fakeMemory) samples() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

func (f *fakeMemory) setSelf(self int64) {
	f.mu.Lock()
	f.self = self
	f.mu.Unlock()
}

func (f *fakeMemory) set(others int64) {
	f.mu.Lock()
	f.others = others
	f.mu.Unlock()
}

func (f *fakeMemory) read() (pressure.MemorySample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = f.at.Add(10 * time.Second) // steady: no projected growth between the test's steps
	f.reads++
	self := f.self
	if self == 0 {
		self = 10 * mib
	}
	limit := f.limit
	if limit == 0 {
		limit = 256 * mib
	}
	return pressure.MemorySample{At: f.at, Limit: limit, Limited: true, Unreclaimable: f.others + self, Self: self}, nil
}

func TestRuntimeBudgetFollowsHeadroomAndLevels(t *testing.T) {
	mem := &fakeMemory{at: time.Unix(1000, 0)}
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var infos []string
	before := debug.SetMemoryLimit(-1)
	rt, err := New(Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 4, BelowFloor: RunAtFloor,
		Registerer: reg, Headroom: pressure.HeadroomConfig{Read: mem.read, Reserve: 16 * mib}, Process: ProcessActions{GoMemoryLimit: true},
		Info: func(s string) { mu.Lock(); infos = append(infos, s); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Budget().Limit() != 64*mib {
		t.Fatalf("alone: budget %d, want the max", rt.Budget().Limit())
	}
	if got := debug.SetMemoryLimit(-1); got != goHeapBase+64*mib {
		t.Fatalf("Go memory limit %d, want %d (base + budget)", got, goHeapBase+64*mib)
	}
	var seen []pressure.HeadroomReport
	rt.OnHeadroom(func(rep pressure.HeadroomReport) { seen = append(seen, rep) })
	// A co-tenant at 200 MiB: allowance 256-200-16 = 40 = floor: budget 40-24 = 16.
	mem.set(210 * mib)
	rep, err := rt.Headroom().Update()
	if err != nil {
		t.Fatal(err)
	}
	rt.applyHeadroom(rep)
	if len(seen) != 1 || seen[0] != rep {
		t.Fatalf("OnHeadroom saw %+v, want the one report applied, %+v", seen, rep)
	}
	if rt.Budget().Limit() != 16*mib {
		t.Fatalf("co-tenant at 210 MiB: budget %s, want the budget floor 16 MiB", bytesize.Human(rt.Budget().Limit()))
	}
	mu.Lock()
	n := 0
	for _, s := range infos {
		if strings.Contains(s, "below its floor of 40 MiB: running at its floor") {
			n++
		}
	}
	mu.Unlock()
	if n != 1 {
		t.Fatalf("floor announced %d times, want once: %q", n, infos)
	}
	if v := testutil.ToFloat64(rt.m.below); v != 1 {
		t.Fatalf("psiflow_elastic_below_floor = %v", v)
	}
	// Back to a small co-tenant, then Full: budget at its floor, workers at 1.
	mem.set(10 * mib)
	rep, _ = rt.Headroom().Update()
	rt.applyHeadroom(rep)
	if rt.Budget().Limit() != 64*mib {
		t.Fatalf("after the co-tenant left: budget %s", bytesize.Human(rt.Budget().Limit()))
	}
	rt.onLevel(pressure.LevelNormal, pressure.LevelSome, time.Now())
	if rt.Workers().Limit() != 2 || !rt.rb.spilling.Load() {
		t.Fatalf("at Some: workers %d (want 2), spilling %v", rt.Workers().Limit(), rt.rb.spilling.Load())
	}
	rt.onLevel(pressure.LevelSome, pressure.LevelFull, time.Now())
	if rt.Workers().Limit() != 1 || rt.Budget().Limit() != 16*mib {
		t.Fatalf("at Full: workers %d budget %s; want 1 and the floor", rt.Workers().Limit(), bytesize.Human(rt.Budget().Limit()))
	}
	rt.onLevel(pressure.LevelFull, pressure.LevelNormal, time.Now())
	if rt.Workers().Limit() != 4+WorkerSlack || rt.Budget().Limit() != 64*mib || rt.rb.spilling.Load() {
		t.Fatal("at Normal again: workers, budget or read buffers not restored")
	}
	runs := rt.ShedRuns()
	if runs[ActionDecodeWorkers] != 2 || runs[ActionBudget] != 1 || runs[ActionReadBuffers] != 1 {
		t.Fatalf("shed runs %v; want decode_workers 2, budget 1, read_buffers 1", runs)
	}
	if v := testutil.ToFloat64(rt.m.freed.WithLabelValues(ActionBudget)); v != 48*mib {
		t.Fatalf("budget action freed %v bytes, want 48 MiB", v)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Fatalf("Go memory limit %d after Close, want it restored to %d", got, before)
	}
	if n, _ := testutil.GatherAndCount(reg); n != 0 {
		t.Fatalf("%d metrics left registered after Close", n)
	}
}

// TestRuntimeFitsWithinAllowance: when the loader holds more than the cgroup leaves
// it, at Normal (no swap: the kernel OOM-kills before memory.pressure rises), the
// runtime gives back the spill pool's free chunks and the Go heap's free pages,
// decodes with one worker and lowers the Go memory limit to what the allowance
// leaves; once it fits again the workers come back.
func TestRuntimeFitsWithinAllowance(t *testing.T) {
	mem := &fakeMemory{at: time.Unix(1000, 0)}
	before := debug.SetMemoryLimit(-1)
	rt, err := New(Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 4,
		Headroom: pressure.HeadroomConfig{Read: mem.read, Reserve: 16 * mib}, Process: ProcessActions{GoMemoryLimit: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Errorf("Go memory limit %d after Close, want %d", got, before)
		}
	}()
	rb := rt.rb
	if rb == nil {
		t.Skip("no UMA here: the spill pool is not there to give back")
	}
	// Touch the spill pool and free it: its chunks stay resident until given back.
	rb.SetPressure(true)
	b, err := rb.Alloc(context.Background(), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	clear(b.Bytes())
	b.Release()
	rb.SetPressure(false)

	tests := []struct {
		name        string
		others      int64
		self        int64
		fitting     bool
		wantWorkers int
	}{
		{"alone: nothing to give back", 10 * mib, 40 * mib, false, 4 + WorkerSlack},
		// allowance 256-150-16 = 90 MiB < 120 MiB held
		{"beside a co-tenant, over the allowance", 150 * mib, 120 * mib, true, 1},
		{"fits again", 150 * mib, 60 * mib, false, 4 + WorkerSlack},
	}
	for _, tt := range tests {
		mem.set(tt.others)
		mem.setSelf(tt.self)
		idle := rt.ShedRuns()[ActionUMAIdle]
		rep, err := rt.Headroom().Update()
		if err != nil {
			t.Fatal(err)
		}
		rt.applyHeadroom(rep)
		if got := rt.Workers().Limit(); got != tt.wantWorkers {
			t.Errorf("%s: workers %d, want %d", tt.name, got, tt.wantWorkers)
		}
		gave := rt.ShedRuns()[ActionUMAIdle] > idle
		if gave != tt.fitting {
			t.Errorf("%s: spill pool given back %v, want %v", tt.name, gave, tt.fitting)
		}
		// The Go limit never exceeds what the allowance leaves after the memory
		// outside Go (what the loader holds beyond the Go runtime's own).
		nonGo := max(0, tt.self-goMemoryUsed())
		if lim := debug.SetMemoryLimit(-1); lim > max(goMinimum, rep.Allowance-nonGo)+mib {
			t.Errorf("%s: Go memory limit %s above allowance %s − other memory %s", tt.name, bytesize.Human(lim), bytesize.Human(rep.Allowance), bytesize.Human(nonGo))
		}
	}
}

// TestRuntimeStopsBelowFloor: a co-tenant that leaves the loader less than its floor
// now (not only in projection) ends the running graph with a BelowFloorError naming
// the memory left; with RunAtFloor the graph runs on.
func TestRuntimeStopsBelowFloor(t *testing.T) {
	for _, tt := range []struct {
		policy   FloorPolicy
		wantStop bool
	}{{StopBelowFloor, true}, {RunAtFloor, false}} {
		t.Run(string(tt.policy), func(t *testing.T) {
			mem := &fakeMemory{at: time.Unix(1000, 0), others: 10 * mib}
			rt, err := New(Config{Mode: Elastic, Floor: 40 * mib, BudgetFloor: 16 * mib, MaxBudget: 64 * mib, Workers: 2, BelowFloor: tt.policy,
				Headroom: pressure.HeadroomConfig{Read: mem.read, Reserve: 16 * mib}})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			g := flow.New("endless", flow.WithRuntime(rt))
			var delivered atomic.Int64
			src := flow.Source(g, "numbers", func(ctx context.Context, out *flow.Emitter[int]) error {
				for i := 0; ; i++ {
					if err := out.Emit(ctx, i); err != nil {
						return err
					}
				}
			})
			flow.Sink(src, "count", func(context.Context, int) error {
				// The co-tenant grows once the graph runs: 256-210-16 = 30 MiB < 40.
				if delivered.Add(1) == 100 {
					mem.set(210 * mib)
				}
				if !tt.wantStop && delivered.Load() == 200_000 {
					return errDone
				}
				return nil
			})
			err = g.Run(ctx)
			var bfe *BelowFloorError
			switch {
			case tt.wantStop && (!errors.As(err, &bfe) || !errors.Is(err, ErrBelowFloor)):
				t.Fatalf("Run = %v, want a BelowFloorError", err)
			case tt.wantStop && !strings.Contains(err.Error(), "leaves the loader 30 MiB") || tt.wantStop && !strings.Contains(err.Error(), "floor of 40 MiB"):
				t.Fatalf("message %q does not name the 30 MiB left and the 40 MiB floor", err)
			case !tt.wantStop && !errors.Is(err, errDone):
				t.Fatalf("Run = %v, want the sink's own end", err)
			}
			if tt.wantStop {
				// The next epoch's graph does not start.
				g2 := flow.New("next", flow.WithRuntime(rt))
				flow.Sink(flow.FromSlice(g2, "items", []int{1}), "consume", func(context.Context, int) error { return nil })
				if err := g2.Run(ctx); !errors.Is(err, ErrBelowFloor) {
					t.Fatalf("next graph: Run = %v, want ErrBelowFloor again", err)
				}
			}
		})
	}
}

var errDone = errors.New("done")

func TestRuntimeFixedAndValidate(t *testing.T) {
	rt, err := New(Config{Mode: Fixed, MaxBudget: 8 * mib, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Headroom() != nil || rt.rb != nil || rt.Gate() != nil || rt.Budget().Limit() != 8*mib {
		t.Fatal("fixed mode: headroom, elastic buffers or a throttle made, or the budget not the one given")
	}
	if rt.UMA() != nil {
		if regions := rt.ReadBuffers().Regions(); len(regions) != 1 || len(regions[0]) != FixedReadPool {
			t.Fatalf("fixed mode: registered regions %d, want one of 64 MiB", len(regions))
		}
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Config{
		{Mode: "big", Workers: 1},
		{Mode: Elastic, Workers: 1, Floor: 0, BudgetFloor: 1, MaxBudget: 1},
		{Mode: Elastic, Workers: 1, Floor: 10, BudgetFloor: 5, MaxBudget: 4},
		{Mode: Elastic, Workers: -1, Floor: 10, BudgetFloor: 5, MaxBudget: 5},
		{Mode: Fixed, Workers: 1, MaxBudget: -1},
	} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) accepted", bad)
		}
	}
	if _, err := ParseMode("elastic"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseMode("Elastic"); err == nil {
		t.Fatal(`ParseMode("Elastic") accepted`)
	}
}

func TestRuntimeShedActionsAtCritical(t *testing.T) {
	mem := &fakeMemory{at: time.Unix(1000, 0)}
	rt, err := New(Config{Mode: Elastic, Pressure: true, Floor: 8 * mib, BudgetFloor: 4 * mib, MaxBudget: 16 * mib, Workers: 2,
		Headroom: pressure.HeadroomConfig{Read: mem.read}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	rt.OnShed(ActionSampleCache, func(context.Context) (int64, error) { return 3 * mib, nil })
	// A spilled buffer, released: its chunks are idle and go back at Critical.
	rt.rb.SetPressure(true)
	b, err := rt.ReadBuffers().Alloc(context.Background(), 2*mib)
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	if err := rt.PressureGate().Shed(context.Background()); err != nil {
		t.Fatal(err)
	}
	runs := rt.ShedRuns()
	for _, a := range []string{ActionSampleCache, ActionUMAIdle, ActionGoHeap} {
		if runs[a] != 1 {
			t.Errorf("shed action %s ran %v times, want 1 (all: %v)", a, runs[a], runs)
		}
	}
	if v := testutil.ToFloat64(rt.m.freed.WithLabelValues(ActionSampleCache)); v != 3*mib {
		t.Errorf("sample_cache freed %v", v)
	}
	if v := testutil.ToFloat64(rt.m.freed.WithLabelValues(ActionUMAIdle)); v < 2*mib {
		t.Errorf("uma_idle freed %v bytes, want at least the 2 MiB spilled buffer", v)
	}
}

// A runtime a library makes changes nothing process-wide unless asked: the Go
// memory limit and the OOM score stay as they were.
func TestRuntimeLeavesTheProcessAlone(t *testing.T) {
	mem := &fakeMemory{at: time.Unix(1000, 0)}
	goBefore := debug.SetMemoryLimit(-1)
	oomBefore, _ := os.ReadFile("/proc/self/oom_score_adj")
	rt, err := New(Config{Mode: Elastic, Pressure: true, Floor: 8 * mib, BudgetFloor: 4 * mib, MaxBudget: 16 * mib, Workers: 2,
		Headroom: pressure.HeadroomConfig{Read: mem.read}})
	if err != nil {
		t.Fatal(err)
	}
	g := flow.New("g", flow.WithRuntime(rt))
	flow.Sink(flow.FromSlice(g, "items", []int{1, 2, 3}), "consume", func(context.Context, int) error { return nil })
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != goBefore {
		t.Errorf("Go memory limit %d while the runtime is open, want %d (GoMemoryLimit not asked for)", got, goBefore)
	}
	if got, _ := os.ReadFile("/proc/self/oom_score_adj"); string(got) != string(oomBefore) {
		t.Errorf("oom_score_adj %q, want %q (OOMVictim not asked for)", got, oomBefore)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
}

// Every graph after the first is the next epoch: the read pool registered smaller
// after an epoch with pressure is done by Graph.Run itself. One graph runs at a
// time, and none after Close.
func TestRuntimeEpochBoundaryAndOneGraphAtATime(t *testing.T) {
	mem := &fakeMemory{at: time.Unix(1000, 0)}
	rt, err := New(Config{Mode: Elastic, Floor: 8 * mib, BudgetFloor: 4 * mib, MaxBudget: 16 * mib, Workers: 2,
		ReadRegistered: 2 * mib, Headroom: pressure.HeadroomConfig{Read: mem.read}})
	if err != nil {
		t.Fatal(err)
	}
	if rt.rb == nil {
		t.Skip("no UMA read buffers on this host")
	}
	run := func(name string, sink func(context.Context, int) error) error {
		g := flow.New(name, flow.WithRuntime(rt))
		flow.Sink(flow.FromSlice(g, "items", []int{1, 2}), "consume", sink)
		return g.Run(context.Background())
	}
	nop := func(context.Context, int) error { return nil }
	rt.rb.SetPressure(true) // pressure in epoch 1: epoch 2 registers a smaller pool
	if err := run("epoch1", nop); err != nil {
		t.Fatal(err)
	}
	rt.rb.SetPressure(false)
	if got := rt.rb.Registered(); got != 2*mib {
		t.Fatalf("registered %d during epoch 1, want 2 MiB", got)
	}
	inner := make(chan error, 1)
	if err := run("epoch2", func(context.Context, int) error {
		select {
		case inner <- run("intruder", nop):
		default:
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := rt.rb.Registered(); got >= 2*mib {
		t.Errorf("registered %d after an epoch with pressure, want less than 2 MiB", got)
	}
	if err := <-inner; !errors.Is(err, ErrGraphRunning) || !strings.Contains(err.Error(), "epoch2") {
		t.Errorf("a graph started while another runs: %v, want ErrGraphRunning naming epoch2", err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := run("late", nop); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a graph after Close: %v, want an error saying the runtime is closed", err)
	}
}

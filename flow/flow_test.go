package flow_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
)

func ints(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func jitter(i int) {
	if i%7 == 0 {
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
	}
}

// runWithin runs g and returns its error, failing the test if Run has not
// returned within a generous deadline (what names the situation in the message).
func runWithin(t *testing.T, g *flow.Graph, ctx context.Context, what string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return %s", what)
		return nil
	}
}

var errBoom = errors.New("boom")

func TestErrorFromAnyStageCancelsGraph(t *testing.T) {
	fail := func(at string) func(string, int) error {
		return func(where string, v int) error {
			if where == at && v == 50 {
				return errBoom
			}
			return nil
		}
	}
	for _, at := range []string{"src", "map", "filter", "flatmap", "parmap", "ordered", "batch-after", "sink"} {
		t.Run(at, func(t *testing.T) {
			check := fail(at)
			g := flow.New("t", flow.WithBudget(1<<20))
			src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
				for i := 0; ; i++ { // infinite: only the error can end it
					if err := check("src", i); err != nil {
						return err
					}
					if err := out.Reserve(ctx, 100); err != nil {
						return err
					}
					if err := out.Emit(ctx, i); err != nil {
						return err
					}
				}
			})
			s := flow.Via(src, stage.Apply("map", 1, true, func(_ context.Context, v int) (int, error) { return v, check("map", v) }))
			s = flow.Via(s, stage.Filter("filter", func(_ context.Context, v int) (bool, error) { return true, check("filter", v) }))
			s = flow.Via(s, stage.FlatMap("flatmap", func(_ context.Context, v int, emit func(int) error) error {
				if err := check("flatmap", v); err != nil {
					return err
				}
				return emit(v)
			}))
			s = flow.Via(s, stage.Apply("parmap", 3, false, func(_ context.Context, v int) (int, error) { return v, check("parmap", v) }))
			s = flow.Via(s, stage.Apply("ordered", 3, true, func(_ context.Context, v int) (int, error) { return v, check("ordered", v) }))
			b := flow.Via(s, stage.Batch[int]("batch", 4, 0))
			s = flow.Via(b, stage.FlatMap("batch-after", func(_ context.Context, vs []int, emit func(int) error) error {
				for _, v := range vs {
					if err := check("batch-after", v); err != nil {
						return err
					}
					if err := emit(v); err != nil {
						return err
					}
				}
				return nil
			}))
			flow.Sink(s, "sink", func(_ context.Context, v int) error { return check("sink", v) })

			err := runWithin(t, g, context.Background(), "after a stage failed")
			var se *flow.StageError
			if !errors.As(err, &se) || se.Stage != at || !errors.Is(err, errBoom) {
				t.Fatalf("Run returned %v; want a StageError from %q wrapping boom", err, at)
			}
			if n := g.Budget().InUse(); n != 0 {
				t.Fatalf("budget in use after Run: %d bytes", n)
			}
		})
	}
}

func TestPanicBecomesErrorWithStack(t *testing.T) {
	for _, name := range []string{"map", "parmap", "ordered"} {
		t.Run(name, func(t *testing.T) {
			f := func(_ context.Context, v int) (int, error) {
				if v == 3 {
					_ = ints(v)[v] // index out of range panics
				}
				return v, nil
			}
			var st stage.Stage[int, int]
			switch name {
			case "map":
				st = stage.Apply(name, 1, true, f)
			case "parmap":
				st = stage.Apply(name, 2, false, f)
			default:
				st = stage.Apply(name, 2, true, f)
			}
			g := flow.New("t")
			var got []int
			flow.Collect(flow.Via(flow.FromSlice(g, "src", ints(10)), st), "sink", &got)
			err := g.Run(context.Background())
			var pe *stage.PanicError
			if !errors.As(err, &pe) {
				t.Fatalf("Run returned %v; want a PanicError", err)
			}
			if pe.Stage != name || !strings.Contains(string(pe.Stack), "flow_test") {
				t.Fatalf("panic error names %q, stack:\n%s", pe.Stage, pe.Stack)
			}
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("error %q does not name the stage", err)
			}
		})
	}
}

func TestCancellationStopsPromptly(t *testing.T) {
	for _, workers := range []int{1, 4} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g := flow.New("t", flow.WithBudget(1000))
			src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
				for i := 0; ; i++ {
					if err := out.Reserve(ctx, 10); err != nil {
						return err
					}
					if err := out.Emit(ctx, i); err != nil {
						return err
					}
				}
			})
			s := flow.Via(src, stage.Apply("work", workers, true, func(_ context.Context, v int) (int, error) { return v, nil }))
			s2 := flow.Via(s, stage.Batch[int]("batch", 8, time.Millisecond))
			var seen atomic.Int64
			flow.Sink(s2, "sink", func(ctx context.Context, v []int) error {
				if seen.Add(1) == 100 {
					cancel()
				}
				return nil
			})
			if err := runWithin(t, g, ctx, "after cancel"); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run returned %v; want context.Canceled", err)
			}
			if n := g.Budget().InUse(); n != 0 {
				t.Fatalf("budget in use after cancel: %d", n)
			}
		})
	}
}

// blob is a Releaser whose liveness is tracked outside the budget, so the test
// checks the budget against an independent count.
type blob struct {
	n    int64
	live *atomic.Int64
	max  *atomic.Int64
	once atomic.Bool
}

func (b *blob) Release() {
	if !b.once.CompareAndSwap(false, true) {
		panic("blob released twice")
	}
	b.live.Add(-b.n)
}

func TestBudgetNeverExceededUnderConcurrency(t *testing.T) {
	const limit = 64 << 10
	var live, maxLive atomic.Int64
	g := flow.New("t", flow.WithBudget(limit), flow.WithQueueSize(64))
	var srcs []flow.Stream[*blob]
	for s := range 4 {
		srcs = append(srcs, flow.Source(g, fmt.Sprint("src", s), func(ctx context.Context, out *flow.Emitter[*blob]) error {
			r := rand.New(rand.NewPCG(uint64(s), 1))
			for range 400 {
				n := int64(1 + r.IntN(8<<10))
				if err := out.Reserve(ctx, n); err != nil {
					return err
				}
				v := live.Add(n)
				for m := maxLive.Load(); v > m && !maxLive.CompareAndSwap(m, v); m = maxLive.Load() {
				}
				if err := out.Emit(ctx, &blob{n: n, live: &live, max: &maxLive}); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	m := flow.Merge(srcs, "merge")
	work := flow.Via(m, stage.Apply("work", 4, false, func(_ context.Context, b *blob) (*blob, error) { jitter(int(b.n)); return b, nil }))
	keep := flow.Via(work, stage.Filter("drop-odd", func(_ context.Context, b *blob) (bool, error) { return b.n%2 == 0, nil }))
	batches := flow.Via(keep, stage.Batch[*blob]("batch", 5, time.Millisecond))
	flow.Sink(batches, "sink", func(_ context.Context, bs []*blob) error {
		return nil // the graph releases every member of the batch (twice would panic)
	})
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := maxLive.Load(); got > limit || got == 0 {
		t.Fatalf("max bytes alive %d; budget %d", got, limit)
	}
	if live.Load() != 0 || g.Budget().InUse() != 0 {
		t.Fatalf("after Run: %d bytes alive, %d in budget", live.Load(), g.Budget().InUse())
	}
	if g.Budget().MaxInUse() < limit/2 {
		t.Fatalf("budget peaked at %d of %d: the test did not apply pressure", g.Budget().MaxInUse(), limit)
	}
}

func TestOversizeRequestFails(t *testing.T) {
	g := flow.New("t", flow.WithBudget(10))
	src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
		if err := out.Reserve(ctx, 11); err != nil {
			return err
		}
		return out.Emit(ctx, 1)
	})
	flow.Sink(src, "sink", func(context.Context, int) error { return nil })
	var oe *flow.ErrOversize
	if err := g.Run(context.Background()); !errors.As(err, &oe) || oe.Request != 11 {
		t.Fatalf("Run returned %v; want ErrOversize", err)
	}
}

func TestFanOutAndMerge(t *testing.T) {
	g := flow.New("t", flow.WithBudget(1<<20))
	src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
		for i := range 100 {
			if err := out.Reserve(ctx, 10); err != nil {
				return err
			}
			if err := out.Emit(ctx, i); err != nil {
				return err
			}
		}
		return nil
	})
	copies := flow.Broadcast(src, "bcast", 2)
	var all []int
	flow.Collect(copies[0], "all", &all)
	parts := flow.RoundRobin(copies[1], "rr", 3)
	var evens []int
	merged := flow.Merge(parts, "merge")
	flow.Collect(merged, "merged", &evens)
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(all, ints(100)) {
		t.Fatalf("broadcast copy 0: %v", all)
	}
	slices.Sort(evens)
	if !slices.Equal(evens, ints(100)) {
		t.Fatalf("round-robin then merge lost or duplicated elements: %d", len(evens))
	}
	if g.Budget().InUse() != 0 {
		t.Fatalf("budget in use: %d", g.Budget().InUse())
	}
}

func TestRoundRobinDealsInTurn(t *testing.T) {
	g := flow.New("t")
	parts := flow.RoundRobin(flow.FromSlice(g, "src", ints(9)), "rr", 3)
	got := make([][]int, 3)
	for i := range parts {
		flow.Collect(parts[i], fmt.Sprint("c", i), &got[i])
	}
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("output %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func TestWiringMistakesAreReported(t *testing.T) {
	tests := []struct {
		name  string
		build func(g *flow.Graph)
		want  string
	}{
		{"consumed twice", func(g *flow.Graph) {
			s := flow.FromSlice(g, "src", ints(3))
			flow.Sink(s, "a", func(context.Context, int) error { return nil })
			flow.Sink(s, "b", func(context.Context, int) error { return nil })
		}, `output of "src" is consumed twice`},
		{"not consumed", func(g *flow.Graph) {
			flow.FromSlice(g, "src", ints(3))
		}, `output of "src" is not consumed`},
		{"duplicate name", func(g *flow.Graph) {
			s := flow.Via(flow.FromSlice(g, "x", ints(3)), stage.Tap("x", func(int) {}))
			flow.Sink(s, "sink", func(context.Context, int) error { return nil })
		}, `two stages are named "x"`},
		{"empty", func(g *flow.Graph) {}, "no stages"},
		{"bad batch", func(g *flow.Graph) {
			flow.Sink(flow.Via(flow.FromSlice(g, "src", ints(3)), stage.Batch[int]("b", 0, 0)), "sink", func(context.Context, []int) error { return nil })
		}, `stage "b": batch size 0`},
		{"no workers", func(g *flow.Graph) {
			m := flow.Map(flow.FromSlice(g, "src", ints(3)), "square", 0, func(_ context.Context, v int) (int, error) { return v * v, nil })
			flow.Sink(m, "sink", func(context.Context, int) error { return nil })
		}, `stage "square": workers 0: must be at least 1`},
		{"negative workers", func(g *flow.Graph) {
			m := flow.OrderedMap(flow.FromSlice(g, "src", ints(3)), "square", -2, func(_ context.Context, v int) (int, error) { return v * v, nil })
			flow.Sink(m, "sink", func(context.Context, int) error { return nil })
		}, `stage "square": workers -2`},
		{"negative batch wait", func(g *flow.Graph) {
			flow.Sink(flow.Batch(flow.FromSlice(g, "src", ints(3)), "b", 2, -time.Second), "sink", func(context.Context, []int) error { return nil })
		}, `stage "b": batch max wait -1s`},
		{"nil map function", func(g *flow.Graph) {
			flow.Sink(flow.Map[int, int](flow.FromSlice(g, "src", ints(3)), "m", 1, nil), "sink", func(context.Context, int) error { return nil })
		}, `stage "m": no function`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := flow.New("g")
			tc.build(g)
			err := g.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run returned %v; want an error containing %q", err, tc.want)
			}
			// Reported before anything ran: no stage counted an element.
			for _, st := range g.Stats() {
				if st.ItemsOut != 0 {
					t.Fatalf("stage %q sent %d elements before the mistake was reported", st.Name, st.ItemsOut)
				}
			}
		})
	}
}

func TestMetricsExported(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := flow.New("demo", flow.WithBudget(1<<20), flow.WithRegistry(reg))
	var gathered string
	src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
		for i := range 10 {
			if err := out.Reserve(ctx, 100); err != nil {
				return err
			}
			if err := out.Emit(ctx, i); err != nil {
				return err
			}
		}
		return nil
	})
	s := flow.Via(src, stage.Filter("even", func(_ context.Context, v int) (bool, error) { return v%2 == 0, nil }))
	flow.Sink(s, "sink", func(context.Context, int) error { return nil })
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Re-register after Run (which unregisters) to read the final values.
	if err := reg.Register(g.Collector()); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil || n == 0 {
		t.Fatalf("gather: %d metrics, %v", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		gathered += mf.String() + "\n"
	}
	expect := `
# HELP psiflow_stage_items_out_total Elements sent by the stage.
# TYPE psiflow_stage_items_out_total counter
psiflow_stage_items_out_total{graph="demo",kind="sink",stage="sink"} 0
psiflow_stage_items_out_total{graph="demo",kind="source",stage="src"} 10
psiflow_stage_items_out_total{graph="demo",kind="stage",stage="even"} 5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect), "psiflow_stage_items_out_total"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"psiflow_stage_bytes_out_total", "psiflow_stage_busy_seconds_total", "psiflow_stage_wait_input_seconds_total",
		"psiflow_stage_wait_output_seconds_total", "psiflow_edge_queue_depth", "psiflow_budget_in_use_bytes", "psiflow_budget_max_in_use_bytes"} {
		if !strings.Contains(gathered, name) {
			t.Errorf("metric %s missing", name)
		}
	}
	if !strings.Contains(gathered, `"src->even"`) {
		t.Errorf("edge label src->even missing")
	}
}

func TestGateAdmitsAtSources(t *testing.T) {
	gate := &countingGate{slots: make(chan struct{}, 2)}
	g := flow.New("t", flow.WithGate(gate))
	src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[int]) error {
		for i := range 50 {
			if err := out.Emit(ctx, i); err != nil {
				return err
			}
		}
		return nil
	})
	var got []int
	flow.Collect(src, "sink", &got)
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if gate.acquired.Load() != 50 || gate.released.Load() != 50 || len(got) != 50 {
		t.Fatalf("gate acquired %d released %d, got %d", gate.acquired.Load(), gate.released.Load(), len(got))
	}
}

type countingGate struct {
	slots              chan struct{}
	acquired, released atomic.Int64
}

func (g *countingGate) Acquire(ctx context.Context) error {
	select {
	case g.slots <- struct{}{}:
		g.acquired.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *countingGate) Release() { g.released.Add(1); <-g.slots }

func TestClosedGateBlocksUntilCancel(t *testing.T) {
	gate := &countingGate{slots: make(chan struct{})} // never admits
	ctx, cancel := context.WithCancel(context.Background())
	g := flow.New("t", flow.WithGate(gate), flow.WithBudget(100))
	src := flow.FromSlice(g, "src", ints(3))
	flow.Sink(src, "sink", func(context.Context, int) error { t.Error("element passed a closed gate"); return nil })
	time.AfterFunc(10*time.Millisecond, cancel)
	if err := g.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	if gate.released.Load() != 0 || g.Budget().InUse() != 0 {
		t.Fatal("gate or budget leaked")
	}
}

func TestCancelledGraphReleasesBatchMembers(t *testing.T) {
	// Batches sit in queues and in the batch stage when the graph is
	// cancelled; every member must be released exactly once.
	var live, maxLive atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := flow.New("t", flow.WithQueueSize(4))
	src := flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[*blob]) error {
		for {
			live.Add(1)
			if err := out.Emit(ctx, &blob{n: 1, live: &live, max: &maxLive}); err != nil {
				return err
			}
		}
	})
	b := flow.Via(src, stage.Batch[*blob]("batch", 3, 0))
	dropped := flow.Via(b, stage.Filter("drop-half", func(_ context.Context, bs []*blob) (bool, error) {
		return len(bs)%2 == 0 || bs[0] != nil && live.Load()%2 == 0, nil
	}))
	n := 0
	flow.Sink(dropped, "sink", func(context.Context, []*blob) error {
		if n++; n == 50 {
			cancel()
		}
		return nil
	})
	if err := g.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	if l := live.Load(); l != 0 {
		t.Fatalf("%d batch members never released", l)
	}
}

func TestBadOptionsAreReported(t *testing.T) {
	for _, tc := range []struct {
		opt  flow.Option
		want string
	}{
		{flow.WithBudget(0), "byte budget of 0 bytes: must be positive"},
		{flow.WithQueueSize(0), "queue size 0 must be at least 1"},
	} {
		g := flow.New("g", tc.opt)
		flow.Collect(flow.FromSlice(g, "src", ints(3)), "sink", new([]int))
		if err := g.Run(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run returned %v; want %q", err, tc.want)
		}
	}
}

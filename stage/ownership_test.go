package stage_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
)

// tracker hands out resources and records every release, failing the test
// on a double release or a release of something still being read.
type tracker struct {
	t        *testing.T
	mu       sync.Mutex
	live     map[int]bool
	next     int
	released atomic.Int64
}

func newTracker(t *testing.T) *tracker { return &tracker{t: t, live: map[int]bool{}} }

type rsc struct {
	tr  *tracker
	id  int
	seq int // the source's sequence number, carried by copies
	// refs counts Retain for fan-out.
	refs atomic.Int32
}

func (tr *tracker) get() *rsc {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.next++
	tr.live[tr.next] = true
	r := &rsc{tr: tr, id: tr.next}
	r.refs.Store(1)
	return r
}

func (r *rsc) Retain() { r.refs.Add(1) }

func (r *rsc) Release() {
	if r.refs.Add(-1) > 0 {
		return
	}
	r.tr.mu.Lock()
	defer r.tr.mu.Unlock()
	if !r.tr.live[r.id] {
		r.tr.t.Errorf("resource %d released twice", r.id)
		return
	}
	delete(r.tr.live, r.id)
	r.tr.released.Add(1)
}

// alive fails the test if r was already released.
func (r *rsc) alive(where string) {
	r.tr.mu.Lock()
	defer r.tr.mu.Unlock()
	if !r.tr.live[r.id] {
		r.tr.t.Errorf("%s: resource %d used after the graph released it", where, r.id)
	}
}

func (tr *tracker) check(want int64) {
	tr.t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.live) != 0 {
		tr.t.Errorf("%d resources never released", len(tr.live))
	}
	if got := tr.released.Load(); got != want {
		tr.t.Errorf("%d resources released, want %d", got, want)
	}
}

// source emits n fresh resources, each with 10 bytes of budget.
func source(g *flow.Graph, tr *tracker, n int) flow.Stream[*rsc] {
	return flow.Source(g, "src", func(ctx context.Context, out *flow.Emitter[*rsc]) error {
		for k := range n {
			if err := out.Reserve(ctx, 10); err != nil {
				return err
			}
			r := tr.get()
			r.seq = k
			if err := out.Emit(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// view is a value that shares its input's memory without owning it.
type view struct{ of *rsc }

func TestOwnershipRule(t *testing.T) {
	const n = 40
	for _, workers := range []int{1, 4} {
		for _, ordered := range []bool{false, true} {
			t.Run(fmt.Sprintf("workers=%d/ordered=%v", workers, ordered), func(t *testing.T) {
				tr := newTracker(t)
				g := flow.New("own", flow.WithBudget(1000))
				mapf := flow.Map[*rsc, *rsc]
				if ordered {
					mapf = flow.OrderedMap[*rsc, *rsc]
				}
				// A new resource per input: the graph releases the input when f returns.
				copied := mapf(source(g, tr, n), "copy", workers, func(_ context.Context, in *rsc) (*rsc, error) {
					in.alive("copy")
					c := tr.get()
					c.seq = in.seq
					return c, nil
				})
				// The input itself travels on: nothing is released.
				same := flow.Map(copied, "same", workers, func(_ context.Context, in *rsc) (*rsc, error) { return in, nil })
				// A view that shares its input: Keep makes the input live as long as the view.
				views := flow.Map(same, "view", workers, func(ctx context.Context, in *rsc) (view, error) {
					if !stage.Keep(ctx) {
						t.Error("Keep not honoured in a map")
					}
					return view{in}, nil
				})
				kept := flow.Filter(views, "drop-odd", func(_ context.Context, v view) (bool, error) { return v.of.seq%2 == 0, nil })
				batches := flow.Batch(kept, "batch", 3, 0)
				// A map over a batch: the graph releases the members once it returns.
				sums := flow.Map(batches, "sum", 1, func(_ context.Context, vs []view) (*rsc, error) {
					for _, v := range vs {
						v.of.alive("sum")
					}
					return tr.get(), nil
				})
				got := 0
				flow.Sink(sums, "sink", func(_ context.Context, r *rsc) error {
					r.alive("sink")
					got++
					return nil
				})
				if err := g.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				// n inputs, n copies, and one sum per batch of the n/2 kept views.
				batchesN := (n/2 + 2) / 3
				tr.check(int64(n + n + batchesN))
				if got != batchesN {
					t.Errorf("%d sums, want %d", got, batchesN)
				}
				if b := g.Budget().InUse(); b != 0 {
					t.Errorf("budget %d bytes still in use", b)
				}
			})
		}
	}
}

func TestOwnershipOnErrorAndCancel(t *testing.T) {
	errBoom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		failAt int // the map fails on this element (0: never)
		cancel int // the sink cancels after this many batches (0: never)
		panics bool
		want   error
	}{
		{"error", 17, 0, false, errBoom},
		{"panic", 9, 0, true, nil},
		{"cancel", 0, 2, false, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g := flow.New("own", flow.WithBudget(200))
			var seen atomic.Int64
			out := flow.OrderedMap(source(g, tr, 1000), "copy", 3, func(_ context.Context, in *rsc) (*rsc, error) {
				if k := seen.Add(1); int(k) == tc.failAt {
					if tc.panics {
						panic("kaboom")
					}
					return nil, errBoom
				}
				return tr.get(), nil
			})
			batches := flow.Batch(out, "batch", 4, 0)
			nb := 0
			flow.Sink(batches, "sink", func(_ context.Context, b []*rsc) error {
				if nb++; nb == tc.cancel {
					cancel()
				}
				return nil
			})
			err := g.Run(ctx)
			var pe *stage.PanicError
			switch {
			case tc.panics && !errors.As(err, &pe):
				t.Fatalf("Run = %v, want a panic error", err)
			case !tc.panics && !errors.Is(err, tc.want):
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
			tr.mu.Lock()
			live := len(tr.live)
			tr.mu.Unlock()
			if live != 0 {
				t.Errorf("%d resources never released", live)
			}
			if b := g.Budget().InUse(); b != 0 {
				t.Errorf("budget %d bytes still in use", b)
			}
		})
	}
}

func TestOwnershipFanOutAndCollect(t *testing.T) {
	tr := newTracker(t)
	g := flow.New("own", flow.WithBudget(1000))
	outs := flow.Broadcast(source(g, tr, 10), "copy", 3)
	for i, o := range outs[:2] {
		flow.Sink(o, fmt.Sprint("sink", i), func(_ context.Context, r *rsc) error {
			r.alive("sink")
			return nil
		})
	}
	var kept []*rsc
	var collected [][]*rsc
	flow.Collect(flow.Batch(outs[2], "batch", 4, 0), "collect", &collected)
	flow.Collect(flow.Filter(flow.Source(g, "src2", func(ctx context.Context, out *flow.Emitter[*rsc]) error {
		return out.Emit(ctx, tr.get())
	}), "all", func(context.Context, *rsc) (bool, error) { return true, nil }), "collect2", &kept)
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Collect hands its values to the caller: the third copy of each of the
	// 10 and the one from src2 are still held.
	tr.mu.Lock()
	live := len(tr.live)
	tr.mu.Unlock()
	if live != 11 || tr.released.Load() != 0 {
		t.Fatalf("%d live, %d released; want 11 live (the collected copies), 0 released", live, tr.released.Load())
	}
	if g.Budget().InUse() != 0 {
		t.Fatalf("budget %d in use", g.Budget().InUse())
	}
	// The caller owns what it collected: releasing it ends every resource,
	// which holds only if each sink released its own copy exactly once.
	for _, b := range collected {
		for _, r := range b {
			r.Release()
		}
	}
	for _, r := range kept {
		r.Release()
	}
	tr.check(11)
}

func TestOwnershipFlatMap(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			tr := newTracker(t)
			g := flow.New("own", flow.WithBudget(1000))
			views := flow.FlatMap(source(g, tr, 10), "split", func(ctx context.Context, in *rsc, emit func(view) error) error {
				if keep {
					stage.Keep(ctx) // the outputs point into the input
				}
				for range 3 {
					if err := emit(view{in}); err != nil {
						return err
					}
				}
				return nil
			})
			seen := 0
			flow.Sink(views, "sink", func(_ context.Context, v view) error {
				if keep {
					v.of.alive("sink after a kept flat-map")
				}
				seen++
				return nil
			})
			if err := g.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if seen != 30 {
				t.Fatalf("%d outputs, want 30", seen)
			}
			tr.check(10)
			if g.Budget().InUse() != 0 {
				t.Fatalf("budget %d in use", g.Budget().InUse())
			}
		})
	}
}

// The deprecated maps keep their rule: the function owns its input.
func TestDeprecatedMapFunctionOwnsInput(t *testing.T) {
	tr := newTracker(t)
	g := flow.New("own")
	out := flow.Via(source(g, tr, 20), stage.ParMap("copy", 2, func(_ context.Context, in *rsc) (*rsc, error) { // the deprecated rule under test
		in.Release()
		return tr.get(), nil
	}))
	flow.Sink(out, "sink", func(context.Context, *rsc) error { return nil })
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.check(40)
}

func TestKeepOutsideAMapIsIgnored(t *testing.T) {
	if stage.Keep(context.Background()) {
		t.Fatal("Keep reported success outside a map")
	}
}

// A map may return a nil pointer of a Releaser type: nothing to release.
func TestOwnershipNilResult(t *testing.T) {
	tr := newTracker(t)
	g := flow.New("own")
	out := flow.Map(source(g, tr, 5), "nothing", 2, func(context.Context, *rsc) (*rsc, error) { return nil, nil })
	n := 0
	flow.Sink(out, "sink", func(_ context.Context, r *rsc) error {
		if r != nil {
			t.Error("non-nil result")
		}
		n++
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("%d results", n)
	}
	tr.check(5)
}

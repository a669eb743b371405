package flow

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fakeRuntime records how the graph used it.
type fakeRuntime struct {
	budget     *Budget
	gate       Gate
	supervised int
	stopWith   error // cancel the graph with this cause once it runs
}

func (f *fakeRuntime) Budget() *Budget { return f.budget }
func (f *fakeRuntime) Gate() Gate      { return f.gate }
func (f *fakeRuntime) Supervise(ctx context.Context, g *Graph, run func(context.Context) error) error {
	f.supervised++
	if f.stopWith == nil {
		return run(ctx)
	}
	rctx, cancel := context.WithCancelCause(ctx)
	cancel(f.stopWith)
	if err := run(rctx); !errors.Is(err, context.Canceled) {
		return err
	}
	return f.stopWith
}

type countingGate struct{ acquired int }

func (c *countingGate) Acquire(context.Context) error { c.acquired++; return nil }
func (c *countingGate) Release()                      {}

// A graph under a runtime draws on its budget, asks its gate and runs through
// Supervise, whose reason to stop is Run's error.
func TestWithRuntime(t *testing.T) {
	b, _ := NewBudget(1 << 20)
	gate := &countingGate{}
	rt := &fakeRuntime{budget: b, gate: gate}
	g := New("rt", WithRuntime(rt))
	Sink(FromSlice(g, "items", []int{1, 2, 3}), "sink", func(context.Context, int) error { return nil })
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if g.Budget() != b || g.Runtime() != rt || rt.supervised != 1 || gate.acquired != 3 {
		t.Fatalf("budget shared %v, runtime %v, supervised %d, gate asked %d times; want the runtime's, 1, 3",
			g.Budget() == b, g.Runtime() == rt, rt.supervised, gate.acquired)
	}

	stop := errors.New("stopped by the runtime")
	rt2 := &fakeRuntime{budget: b, stopWith: stop}
	g2 := New("stopped", WithRuntime(rt2))
	Sink(FromSlice(g2, "items", []int{1}), "sink", func(context.Context, int) error { return nil })
	if err := g2.Run(context.Background()); !errors.Is(err, stop) {
		t.Fatalf("Run = %v, want the runtime's reason", err)
	}
}

// The runtime is the one attach point: a budget or gate given beside it, or a
// nil runtime, is an error before anything runs.
func TestWithRuntimeConflicts(t *testing.T) {
	b, _ := NewBudget(1 << 20)
	for _, tc := range []struct {
		name string
		opts []Option
		want string
	}{
		{"budget too", []Option{WithRuntime(&fakeRuntime{budget: b}), WithBudget(1 << 20)}, "drop WithBudget"},
		{"gate first", []Option{WithGate(&countingGate{}), WithRuntime(&fakeRuntime{budget: b})}, "drop WithBudget"},
		{"nil", []Option{WithRuntime(nil)}, "runtime is nil"},
		{"no budget", []Option{WithRuntime(&fakeRuntime{})}, "no budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("g", tc.opts...)
			Sink(FromSlice(g, "items", []int{1}), "sink", func(context.Context, int) error { return nil })
			if err := g.Run(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want %q", err, tc.want)
			}
		})
	}
}

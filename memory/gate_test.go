package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/kerneltest"
	"github.com/psiflow/psiflow/pressure"
)

// fakeSource is a pressure.Source fed by the test.
type fakeSource struct{ ch chan pressure.Event }

func (f *fakeSource) Events() <-chan pressure.Event { return f.ch }
func (f *fakeSource) Err() error                    { return nil }
func (f *fakeSource) Describe() string              { return "fake" }

func ints(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestGateStopsAndResumesGraph: a full-stall event stops a graph's source before it
// produces anything; when the level clears and permits recover, the graph finishes.
func TestGateStopsAndResumesGraph(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := newThrottle(GateConfig{
			Model:  pressure.ModelConfig{Hold: 2 * time.Second, MinDwell: time.Second},
			Policy: pressure.Policy{MaxPermits: 4, Quiet: time.Second, Step: 1, StepEvery: 100 * time.Millisecond},
		}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		src := &fakeSource{ch: make(chan pressure.Event)}
		watchDone := make(chan error, 1)
		go func() { watchDone <- th.watch(ctx, src) }()
		src.ch <- pressure.Event{Time: time.Now(), Signal: pressure.SignalFull, Share: 0.05, Window: 2 * time.Second, Count: 1}
		synctest.Wait()
		if st := th.gate.Stats(); st.Limit != 0 {
			t.Fatalf("gate open after a full event: %+v", st)
		}

		var seen atomic.Int64
		g := flow.New("gated", flow.WithGate(th.gate))
		flow.Sink(flow.FromSlice(g, "numbers", ints(100)), "count", func(ctx context.Context, v int) error {
			seen.Add(1)
			return nil
		})
		runDone := make(chan error, 1)
		go func() { runDone <- g.Run(ctx) }()
		synctest.Wait()
		if n := seen.Load(); n != 0 {
			t.Fatalf("%d elements passed a closed gate", n)
		}
		if st := th.gate.Stats(); st.Waiting != 1 {
			t.Fatalf("source not waiting at the gate: %+v", st)
		}
		start := time.Now()
		if err := <-runDone; err != nil {
			t.Fatal(err)
		}
		// The trigger's assertion lasts two of its 2s windows (longer than Hold 2s),
		// then Quiet 1s passes before the first permit.
		if waited := time.Since(start); waited != 5*time.Second {
			t.Fatalf("graph resumed after %s, want 5s (two 2s windows + quiet 1s)", waited)
		}
		if n := seen.Load(); n != 100 {
			t.Fatalf("sink saw %d elements, want 100", n)
		}
		cancel()
		if err := <-watchDone; err != nil {
			t.Fatal(err)
		}
		d := th.rec.Snapshot(time.Now())
		if d.Levels[pressure.LevelFull].Entries != 1 {
			t.Fatalf("recorder: %+v", d.Levels)
		}
	})
}

// TestRunWithRealSources runs a graph under a runtime with the host's real
// pressure sources; without pressure it completes and everything stops.
func TestRunWithRealSources(t *testing.T) {
	reg := prometheus.NewRegistry()
	rt, err := New(Config{Mode: Fixed, MaxBudget: 16 << 20, Workers: 1, ReadRegistered: -1, Pressure: true, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var sum atomic.Int64
	g := flow.New("real", flow.WithRuntime(rt))
	flow.Sink(flow.FromSlice(g, "numbers", ints(1000)), "sum", func(ctx context.Context, v int) error {
		sum.Add(int64(v))
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sum.Load() != 999*1000/2 {
		t.Fatalf("sum %d", sum.Load())
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	admits := -1.0
	for _, mf := range mfs {
		if mf.GetName() != "psiflow_pressure_gate_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == "admit" {
				admits = m.GetCounter().GetValue()
			}
		}
	}
	if admits < 1000 {
		t.Fatalf("admit decisions %v, want >= 1000 (one per element)", admits)
	}
}

// TestRunFailsWhenSourceFails: removing the watched cgroup ends the trigger source;
// the graph is cancelled and its error says why.
func TestRunFailsWhenSourceFails(t *testing.T) {
	name := fmt.Sprintf("throttletest-%d", os.Getpid())
	grp, err := cgroup.New(name)
	if err != nil {
		kerneltest.Skip(t, kerneltest.Cgroups, "the kernel refuses to create cgroup %s: %v", name, err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			grp.Remove()
		}
	})
	if _, err := grp.PressurePath("memory"); err != nil {
		kerneltest.Skip(t, kerneltest.PSI, "no memory.pressure for cgroup %s: %v", name, err)
	}
	rt, err := New(Config{Mode: Fixed, MaxBudget: 16 << 20, Workers: 1, ReadRegistered: -1, Pressure: true,
		Gate: GateConfig{Open: pressure.OpenConfig{Group: grp, MemoryEventsInterval: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	started := make(chan struct{})
	g := flow.New("doomed", flow.WithRuntime(rt))
	flow.Sink(flow.Source(g, "forever", func(ctx context.Context, out *flow.Emitter[int]) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}), "drop", func(context.Context, int) error { return nil })
	done := make(chan error, 1)
	go func() { done <- g.Run(context.Background()) }()
	<-started
	if err := grp.Remove(); err != nil {
		t.Fatal(err)
	}
	removed = true
	select {
	case err := <-done:
		if !errors.Is(err, ErrSourceFailed) || !strings.Contains(err.Error(), name) {
			t.Fatalf("Graph.Run = %v, want ErrSourceFailed naming cgroup %s", err, name)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("graph still running 30s after its cgroup was removed")
	}
}

// sumGraph runs a graph of n numbers under rt and checks their sum.
func sumGraph(t *testing.T, rt *Runtime, name string, n int) error {
	t.Helper()
	var sum atomic.Int64
	g := flow.New(name, flow.WithRuntime(rt))
	flow.Sink(flow.FromSlice(g, "numbers", ints(n)), "sum", func(ctx context.Context, v int) error {
		sum.Add(int64(v))
		return nil
	})
	err := g.Run(context.Background())
	if err == nil && sum.Load() != int64(n*(n-1)/2) {
		t.Fatalf("graph %s: sum %d", name, sum.Load())
	}
	return err
}

// TestMonitorOutlivesGraphs: the first graph opens the pressure monitor, later
// graphs (the next epochs) run under the same one, and Close ends it and its
// sources; a graph after Close fails.
func TestMonitorOutlivesGraphs(t *testing.T) {
	rt, err := New(Config{Mode: Fixed, MaxBudget: 16 << 20, Workers: 1, ReadRegistered: -1, Pressure: true})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			rt.Close()
		}
	}()
	if rt.th.mon != nil {
		t.Fatal("monitor open before the first graph")
	}
	if err := sumGraph(t, rt, "epoch1", 100); err != nil {
		t.Fatal(err)
	}
	m := rt.th.mon
	if m == nil {
		t.Fatal("no monitor after the first graph")
	}
	select {
	case <-m.done:
		t.Fatal("the monitor ended with the first graph")
	default:
	}
	if err := sumGraph(t, rt, "epoch2", 100); err != nil {
		t.Fatal(err)
	}
	if rt.th.mon != m {
		t.Fatal("the second graph opened a monitor of its own")
	}
	closed = true
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.done:
	default:
		t.Fatal("Close returned before the monitor ended")
	}
	if err := sumGraph(t, rt, "after", 10); err == nil {
		t.Fatal("a graph ran after Close")
	}
}

// TestGraphAfterSourceFailedFails: when the watched cgroup goes away between two
// graphs, the monitor's source fails and the next graph does not run: its error
// wraps ErrSourceFailed.
func TestGraphAfterSourceFailedFails(t *testing.T) {
	name := fmt.Sprintf("throttlenext-%d", os.Getpid())
	grp, err := cgroup.New(name)
	if err != nil {
		kerneltest.Skip(t, kerneltest.Cgroups, "the kernel refuses to create cgroup %s: %v", name, err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			grp.Remove()
		}
	})
	if _, err := grp.PressurePath("memory"); err != nil {
		kerneltest.Skip(t, kerneltest.PSI, "no memory.pressure for cgroup %s: %v", name, err)
	}
	rt, err := New(Config{Mode: Fixed, MaxBudget: 16 << 20, Workers: 1, ReadRegistered: -1, Pressure: true,
		Gate: GateConfig{Open: pressure.OpenConfig{Group: grp, MemoryEventsInterval: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if err := sumGraph(t, rt, "epoch1", 100); err != nil {
		t.Fatal(err)
	}
	m := rt.th.mon
	if err := grp.Remove(); err != nil {
		t.Fatal(err)
	}
	removed = true
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		t.Fatal("monitor still running 30s after its cgroup was removed")
	}
	err = sumGraph(t, rt, "epoch2", 100)
	if !errors.Is(err, ErrSourceFailed) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "epoch2") {
		t.Fatalf("second graph: %v, want ErrSourceFailed naming cgroup %s and the graph", err, name)
	}
}

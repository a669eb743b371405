package memory

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/pressure"
)

// The pressure gate satisfies flow's gate contract structurally.
var _ flow.Gate = (*pressure.Gate)(nil)

// GateConfig configures the pressure gate of a [Runtime] and the monitor that
// drives it. The zero value uses every default: the process's own cgroup, the
// default triggers, model and policy.
type GateConfig struct {
	// Open says which cgroup to watch and how ([pressure.Open]).
	Open pressure.OpenConfig
	// Model configures the level model.
	Model pressure.ModelConfig
	// Policy turns levels into permits.
	Policy pressure.Policy
	// OnShedError, if set, receives errors of shed callbacks.
	OnShedError func(error)
}

// throttle is the pressure gate of a runtime's graphs and the monitor that drives
// it. The monitor is opened by the first graph and runs until the runtime closes,
// between graphs too: a pipeline's epochs are graphs of their own, and opening and
// closing the sources for each cost every epoch ≈ 24 ms of wall time on the
// project's machine (closing each PSI trigger waits for an RCU grace period).
type throttle struct {
	cfg     GateConfig
	onLevel func(from, to pressure.Level, at time.Time)
	gate    *pressure.Gate
	model   *pressure.Model
	rec     *pressure.Recorder

	// mu serialises monitors: the model is driven by one goroutine at a time.
	mu sync.Mutex

	monMu  sync.Mutex
	mon    *monitorRun // nil until the first graph, and after close
	closed bool
}

// monitorRun is the monitor of a throttle: its sources and the goroutine that
// drives the gate from them.
type monitorRun struct {
	desc string             // the sources, for errors
	stop context.CancelFunc // ends the sources, then the goroutine
	done chan struct{}      // closed once the goroutine and the sources have ended

	mu     sync.Mutex
	failed error                   // why the sources failed; nil while they run
	graph  context.CancelCauseFunc // the running graph's; nil between graphs
	name   string                  // the running graph's name
}

// newThrottle returns a throttle at LevelNormal with every permit available,
// its metrics registered with reg when reg is not nil.
func newThrottle(cfg GateConfig, reg prometheus.Registerer, onLevel func(from, to pressure.Level, at time.Time)) (*throttle, error) {
	model, err := pressure.NewModel(cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("pressure gate: %w", err)
	}
	gate, err := pressure.NewGate(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("pressure gate: %w", err)
	}
	t := &throttle{cfg: cfg, onLevel: onLevel, gate: gate, model: model, rec: pressure.NewRecorder(time.Now())}
	if reg != nil {
		if err := pressure.Register(reg, t.rec, gate); err != nil {
			return nil, fmt.Errorf("pressure gate: %w", err)
		}
	}
	return t, nil
}

// watch drives the gate from src until ctx ends (nil) or src fails (its error).
// src must end when ctx is cancelled (open it with ctx).
func (t *throttle) watch(ctx context.Context, src pressure.Source) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := &pressure.Monitor{Source: src, Model: t.model, Gate: t.gate, Recorder: t.rec,
		OnLevel: t.onLevel, OnShedError: t.cfg.OnShedError}
	return m.Run(ctx)
}

// ErrSourceFailed is wrapped by the error of a graph whose pressure source failed
// while it ran (for example its cgroup was removed). The graph is then cancelled:
// a gate without a signal could stay closed forever.
var ErrSourceFailed = errors.New("pressure source failed")

// supervise runs run under the monitor, which the first graph opens
// ([pressure.Open] with GateConfig.Open) and which runs on until [throttle.close].
// It returns run's error, or, if the pressure source failed first, an error
// wrapping ErrSourceFailed (run's context is cancelled then); a graph that starts
// after the source failed does not run.
func (t *throttle) supervise(ctx context.Context, name string, run func(context.Context) error) error {
	m, err := t.monitor(ctx)
	if err != nil {
		return fmt.Errorf("pressure gate of graph %s: %w", name, err)
	}
	gctx, cancelGraph := context.WithCancelCause(ctx)
	defer cancelGraph(nil)
	m.mu.Lock()
	if m.failed != nil {
		m.mu.Unlock()
		return m.failure(name)
	}
	m.graph, m.name = cancelGraph, name
	m.mu.Unlock()
	gerr := run(gctx)
	m.mu.Lock()
	m.graph, m.name = nil, ""
	failed := m.failed != nil
	m.mu.Unlock()
	if failed {
		return m.failure(name)
	}
	return gerr
}

// failure is the error of graph name after the sources failed; m.failed is set.
func (m *monitorRun) failure(name string) error {
	return fmt.Errorf("pressure gate of graph %s: %w: %s: %w", name, ErrSourceFailed, m.desc, m.failed)
}

// monitor returns the running monitor, opening its sources first if no graph has
// yet. ctx is the first graph's: the sources are opened under it but live on until
// close.
func (t *throttle) monitor(ctx context.Context) (*monitorRun, error) {
	t.monMu.Lock()
	defer t.monMu.Unlock()
	if t.closed {
		return nil, errors.New("the runtime is closed")
	}
	if t.mon != nil {
		return t.mon, nil
	}
	mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	opened, err := pressure.Open(mctx, t.cfg.Open)
	if err != nil {
		stop()
		return nil, err
	}
	m := &monitorRun{desc: opened.Source.Describe(), stop: stop, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		// The monitor keeps an OS thread of its own: under reclaim it competes only
		// for a CPU, not for a thread the graph's goroutines hold.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := t.watch(mctx, opened.Source)
		for range opened.Source.Events() {
			// The sources end on mctx; wait for them so nothing outlives close.
		}
		if err == nil {
			return
		}
		m.mu.Lock()
		m.failed = err
		if m.graph != nil {
			m.graph(m.failure(m.name))
		}
		m.mu.Unlock()
	}()
	t.mon = m
	return m, nil
}

// close stops the monitor and waits until it and its sources have ended. Graphs
// started after it fail.
func (t *throttle) close() {
	t.monMu.Lock()
	m := t.mon
	t.mon, t.closed = nil, true
	t.monMu.Unlock()
	if m != nil {
		m.stop()
		<-m.done
	}
}

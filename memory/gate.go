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
// it while a graph runs.
type throttle struct {
	cfg     GateConfig
	onLevel func(from, to pressure.Level, at time.Time)
	gate    *pressure.Gate
	model   *pressure.Model
	rec     *pressure.Recorder

	// mu serialises monitors: the model is driven by one goroutine at a time.
	mu sync.Mutex
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

// supervise opens the pressure sources ([pressure.Open] with GateConfig.Open), then
// calls run and the monitor together. It returns once run has returned and the
// monitor and its sources have stopped: run's error, or, if the pressure source
// failed first, an error wrapping ErrSourceFailed (run's context is cancelled then).
func (t *throttle) supervise(ctx context.Context, name string, run func(context.Context) error) error {
	mctx, stopMonitor := context.WithCancel(ctx)
	defer stopMonitor()
	opened, err := pressure.Open(mctx, t.cfg.Open)
	if err != nil {
		return fmt.Errorf("pressure gate of graph %s: %w", name, err)
	}
	gctx, cancelGraph := context.WithCancelCause(ctx)
	defer cancelGraph(nil)
	monitorErr := make(chan error, 1)
	go func() {
		// The monitor keeps an OS thread of its own: under reclaim it competes only
		// for a CPU, not for a thread the graph's goroutines hold.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := t.watch(mctx, opened.Source)
		if err != nil {
			err = fmt.Errorf("pressure gate of graph %s: %w: %s: %w", name, ErrSourceFailed, opened.Source.Describe(), err)
			cancelGraph(err)
		}
		monitorErr <- err
	}()
	gerr := run(gctx)
	stopMonitor()
	merr := <-monitorErr
	for range opened.Source.Events() {
		// The sources end on mctx; wait for them so nothing outlives the graph.
	}
	if merr != nil {
		return merr
	}
	return gerr
}

package throttle

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

// Config configures a [Throttle]. The zero value uses every default: the process's
// own cgroup, the default triggers, model and policy.
type Config struct {
	// Open says which cgroup to watch and how ([pressure.Open]).
	Open pressure.OpenConfig
	// Model configures the level model.
	Model pressure.ModelConfig
	// Policy turns levels into permits.
	Policy pressure.Policy
	// Registerer, if set, receives the psiflow_pressure_* metrics.
	Registerer prometheus.Registerer
	// OnLevel, if set, is called on every level change (from the monitor goroutine).
	OnLevel func(from, to pressure.Level, at time.Time)
	// OnShedError, if set, receives errors of shed callbacks.
	OnShedError func(error)
}

// Throttle is the pressure gate of one or more graphs and the monitor that drives it.
type Throttle struct {
	cfg   Config
	gate  *pressure.Gate
	model *pressure.Model
	rec   *pressure.Recorder

	// mu serialises monitors: the model is driven by one goroutine at a time.
	mu sync.Mutex
}

// New returns a throttle at LevelNormal with every permit available. It registers
// the metrics with cfg.Registerer if one is set.
func New(cfg Config) (*Throttle, error) {
	model, err := pressure.NewModel(cfg.Model)
	if err != nil {
		return nil, fmt.Errorf("throttle: %w", err)
	}
	gate, err := pressure.NewGate(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("throttle: %w", err)
	}
	t := &Throttle{cfg: cfg, gate: gate, model: model, rec: pressure.NewRecorder(time.Now())}
	if cfg.Registerer != nil {
		if err := pressure.Register(cfg.Registerer, t.rec, gate); err != nil {
			return nil, fmt.Errorf("throttle: %w", err)
		}
	}
	return t, nil
}

// Gate returns the gate, for graphs built with flow.WithGate directly or for stats.
func (t *Throttle) Gate() *pressure.Gate { return t.gate }

// Recorder returns the level distribution recorder.
func (t *Throttle) Recorder() *pressure.Recorder { return t.rec }

// Option installs the throttle's gate on a graph: pass it to flow.New.
func (t *Throttle) Option() flow.Option { return flow.WithGate(t.gate) }

// OnShed registers a callback run when the level is Critical ([pressure.Gate.OnShed]).
func (t *Throttle) OnShed(name string, f pressure.ShedFunc) { t.gate.OnShed(name, f) }

// Watch drives the gate from src until ctx ends (nil) or src fails (its error).
// src must end when ctx is cancelled (open it with ctx).
func (t *Throttle) Watch(ctx context.Context, src pressure.Source) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	m := &pressure.Monitor{Source: src, Model: t.model, Gate: t.gate, Recorder: t.rec,
		OnLevel: t.cfg.OnLevel, OnShedError: t.cfg.OnShedError}
	return m.Run(ctx)
}

// ErrSourceFailed is wrapped by [Throttle.Run] when the pressure source fails while
// the graph runs (for example the cgroup was removed). The graph is then cancelled:
// a gate without a signal could stay closed forever.
var ErrSourceFailed = errors.New("pressure source failed")

// Run opens the pressure sources ([pressure.Open] with Config.Open), then runs g and
// the monitor together. It returns once g.Run has returned and the monitor and its
// sources have stopped: g's error, or, if the pressure source failed first, an error
// wrapping ErrSourceFailed (g is cancelled in that case). g must have been built with
// [Throttle.Option].
func (t *Throttle) Run(ctx context.Context, g *flow.Graph) error {
	mctx, stopMonitor := context.WithCancel(ctx)
	defer stopMonitor()
	opened, err := pressure.Open(mctx, t.cfg.Open)
	if err != nil {
		return fmt.Errorf("throttle for graph %s: %w", g.Name(), err)
	}
	gctx, cancelGraph := context.WithCancelCause(ctx)
	defer cancelGraph(nil)
	monitorErr := make(chan error, 1)
	go func() {
		// The monitor keeps an OS thread of its own: under reclaim it competes only
		// for a CPU, not for a thread the graph's goroutines hold.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := t.Watch(mctx, opened.Source)
		if err != nil {
			err = fmt.Errorf("throttle for graph %s: %w: %s: %w", g.Name(), ErrSourceFailed, opened.Source.Describe(), err)
			cancelGraph(err)
		}
		monitorErr <- err
	}()
	gerr := g.Run(gctx)
	stopMonitor()
	merr := <-monitorErr
	for range opened.Source.Events() {
		// The sources end on mctx; wait for them so nothing outlives Run.
	}
	if merr != nil {
		return merr
	}
	return gerr
}

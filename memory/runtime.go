package memory

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/memory/pause"
	"github.com/psiflow/psiflow/pressure"
	"github.com/psiflow/psiflow/source"
	"github.com/psiflow/psiflow/source/umabuf"
	"github.com/psiflow/psiflow/uma"
)

// Runtime is a loader's memory runtime: its byte budget, read buffers, decode
// worker limit, pressure gate and shed actions. A graph takes it once, with
// flow.WithRuntime(rt), and Graph.Run does the rest: the headroom is sampled while
// the graph runs, the pressure monitor runs from the first graph until Close, and
// a graph after the first is the next epoch (the
// previous graph's garbage is collected and the registered read pool resized
// first). One graph runs at a time; Close the runtime at the end.
type Runtime struct {
	cfg     Config
	budget  *flow.Budget
	th      *throttle
	head    *pressure.Headroom
	u       *uma.UMA
	bufs    source.BufferProvider
	rb      *ReadBuffers
	fixed   *uma.Pool
	workers *Workers
	m       *metrics

	// Pausing below the floor (PauseBelowFloor): the decision, the gate in front
	// of the pressure gate, its metrics, and what a pause did so far (applyMu).
	pc         *pause.Controller
	pg         *pause.Gate
	unregPause func()
	paused     pauseState
	// The locked program text: its resident bytes (nil: not locked or not
	// readable), how often a pause released it and what was resident after the
	// last release (applyMu).
	textMeter    func() int64
	textReleases int
	textAfter    int64
	// The watch of a pause for room (LeaveNoRoom; applyMu).
	noRoom pauseWatch
	// The watch of a pause's drain: it sheds as the reads in flight at the
	// pause are decoded and delivered (applyMu).
	drain pauseWatch
	// quietShed: the round of giving back in progress is one of a settled
	// pause, which skips the Go heap's collection (freeHeap).
	quietShed atomic.Bool

	level    atomic.Int32
	headGoal atomic.Int64            // the budget the headroom asks for
	goFit    atomic.Int64            // the Go memory limit the allowance leaves (0: none yet)
	fit      fitState                // under applyMu
	stopRun  context.CancelCauseFunc // the running graph's, under applyMu (nil between graphs)
	stopErr  error                   // why the run was stopped, under applyMu
	running  string                  // the running graph's name, under applyMu
	graphs   int                     // graphs supervised so far, under applyMu
	applyMu  sync.Mutex
	onHead   []func(pressure.HeadroomReport) // under applyMu
	prevGo   int64
	setGo    bool
	closed   bool
}

// New builds the runtime. On error nothing is left open.
func New(cfg Config) (_ *Runtime, err error) {
	if cfg.Mode == "" {
		cfg.Mode = Elastic
	}
	if cfg.BelowFloor == "" {
		cfg.BelowFloor = PauseBelowFloor
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Workers == 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	r := &Runtime{cfg: cfg, m: m}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.Close())
		}
	}()
	if r.workers, err = NewWorkers(cfg.Workers + WorkerSlack); err != nil {
		return nil, err
	}
	m.workers.Set(float64(cfg.Workers))

	// A limit that can never hold the floor is refused before the pools are
	// mapped and the program text is locked, which at such a limit would be the
	// OOM killer's cue.
	if err := checkLimit(cfg); err != nil {
		return nil, err
	}

	budget := cfg.MaxBudget
	if cfg.Mode == Fixed && budget == 0 {
		b, src, err := DefaultByteBudget(0)
		if err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
		budget = b
		r.info("budget: %s in flight, a quarter of the memory limit (%s)", bytesize.Human(b), src)
	}
	if r.budget, err = flow.NewBudget(budget); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	r.headGoal.Store(budget)
	m.budget.Set(float64(budget))

	if err := r.openBuffers(); err != nil {
		return nil, err
	}
	if cfg.Mode == Elastic && cfg.Process.OOMVictim {
		if old, err := PreferOOMVictim(); err != nil {
			r.info("OOM preference: %v", err)
		} else if old != 1000 {
			r.info("OOM preference: oom_score_adj %d → 1000, the loader goes before its co-tenant", old)
		}
	}
	textLocked := false
	if cfg.Mode == Elastic && cfg.Process.LockText {
		if n, err := LockProgramText(); err != nil {
			r.info("program text: not locked (%v)", err)
		} else {
			textLocked = true
			r.info("program text: %s of mappings locked as faulted in (mlock2 MLOCK_ONFAULT)", bytesize.Human(n))
		}
	}
	if cfg.Mode == Elastic {
		hc := cfg.Headroom
		if textLocked {
			r.textMeter = programTextMeter()
			if hc.SelfLocked == nil {
				// The locked text grows as the loader starts: that growth is the
				// loader's own, and projected as the others' it paused it for nothing.
				hc.SelfLocked = r.textMeter
			}
		}
		if hc.Interval == 0 {
			hc.Interval = HeadroomInterval
		}
		hc.Floor, hc.BudgetFloor, hc.Max = cfg.Floor, cfg.BudgetFloor, cfg.MaxBudget
		if r.head, err = pressure.NewHeadroom(hc); err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
		r.info("budget: follows the cgroup's headroom between its floor %s and %s (loader floor %s)",
			bytesize.Human(cfg.BudgetFloor), bytesize.Human(cfg.MaxBudget), bytesize.Human(cfg.Floor))
	}
	if cfg.Pressure {
		gc := cfg.Gate
		var onLevel func(from, to pressure.Level, at time.Time)
		if cfg.Mode == Elastic {
			onLevel = r.onLevel
			if gc.Policy.FullPermits == 0 {
				// At Full the budget is at its floor and one worker decodes: a few
				// reads in flight keep that floor moving (see Policy.FullPermits).
				gc.Policy.FullPermits = FullPermits
			}
		}
		if r.th, err = newThrottle(gc, cfg.Registerer, onLevel); err != nil {
			return nil, fmt.Errorf("memory: %w", err)
		}
		if cfg.Mode == Elastic {
			r.th.gate.OnShed(ActionUMAIdle, r.shedUMA)
			r.th.gate.OnShed(ActionGoHeap, r.shedHeap)
		}
	}
	if cfg.Mode == Elastic && cfg.BelowFloor == PauseBelowFloor {
		if err := r.newPause(); err != nil {
			return nil, err
		}
	}
	if r.head != nil {
		// A first sample now: the first graph starts with the right budget.
		rep, err := r.head.Update()
		if err != nil {
			r.info("headroom: %v (budget stays at %s until a sample succeeds)", err, bytesize.Human(budget))
		}
		if r.pc != nil {
			r.info("%s", r.pauseLine(rep))
		}
		if err == nil {
			r.applyHeadroom(rep)
		}
	}
	return r, nil
}

// NewGraph returns a graph named name (with opts, as flow.New takes them)
// under a memory runtime of its own, made from cfg: the graph owns the
// runtime, and its Run closes it when it returns (flow.Closes). It is the one
// call a pipeline of one graph needs; the runtime must be made before the
// graph's sources, which take its budget, gate and read buffers.
//
// A runtime spans the graphs it runs one after another (epochs: the read pool
// is resized and the heap collected between them, the pressure monitor runs
// throughout); for several graphs, make one with [New], give it to each with
// flow.WithRuntime, and Close it after the last. A graph from NewGraph that is
// never run keeps its runtime (its read pool, its pressure monitor) until the
// process ends.
func NewGraph(name string, cfg Config, opts ...flow.Option) (*flow.Graph, error) {
	rt, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("graph %q: %w", name, err)
	}
	return flow.New(name, append([]flow.Option{flow.WithRuntime(rt), flow.Closes(rt)}, opts...)...), nil
}

// openBuffers makes the runtime's UMA, one per runtime (the read buffers, and a
// pipeline's sample cache and GPU staging ring, live in it, so that its shed
// actions reach them), and the read buffers in it.
func (r *Runtime) openBuffers() error {
	u, uerr := uma.New(uma.Config{ChunkSize: 256 << 10, Registerer: r.cfg.Registerer, MemoryLimit: SelfMemoryLimit})
	if uerr == nil {
		r.u = u
	}
	size := r.cfg.ReadRegistered
	if size < 0 {
		return nil
	}
	if size == 0 {
		size = FixedReadPool
		if r.cfg.Mode == Elastic {
			size = min(r.cfg.BudgetFloor, ElasticReadPool)
		}
	}
	if r.u == nil {
		r.info("read buffers: package source's own pool (no UMA here: %v)", uerr)
		return nil
	}
	var err error
	if r.cfg.Mode == Fixed {
		if r.fixed, err = r.u.NewPool("read-buffers", size, uma.ArenaOptions{Registered: true}); err != nil {
			return fmt.Errorf("memory: read pool: %w", err)
		}
		if r.bufs, err = umabuf.New(r.fixed); err != nil {
			return fmt.Errorf("memory: %w", err)
		}
		r.m.reg.Set(float64(size))
		r.info("read buffers: a %s UMA pool registered with the rings (fixed)", bytesize.Human(size))
		return nil
	}
	spill := r.cfg.MaxBudget + max(4<<20, r.cfg.MaxBudget/8)
	if size > r.cfg.MaxBudget {
		// Reads are charged to the budget: no more can be in flight at once.
		r.info("read buffers: %s asked for, more than the largest budget; %s registered", bytesize.Human(size), bytesize.Human(r.cfg.MaxBudget))
		size = r.cfg.MaxBudget
	}
	if r.rb, err = newReadBuffers(r.u, size, spill); err != nil {
		return err
	}
	r.bufs = r.rb
	r.m.reg.Set(float64(r.rb.Registered()))
	r.info("read buffers: %s registered with the rings (the reads in flight), overflow and pressure into an unregistered pool given back under pressure",
		bytesize.Human(r.rb.Registered()))
	return nil
}

func (r *Runtime) info(format string, args ...any) {
	if r.cfg.Info != nil {
		r.cfg.Info(fmt.Sprintf(format, args...))
	}
}

// Mode returns the runtime's mode.
func (r *Runtime) Mode() Mode { return r.cfg.Mode }

// Budget returns the byte budget shared by the runtime's graphs (flow.Runtime).
func (r *Runtime) Budget() *flow.Budget { return r.budget }

// Gate returns the gate the graphs' sources take permits from (flow.Runtime): the
// pressure gate (with Pressure) behind the pause gate (PauseBelowFloor), either,
// or nil for neither.
func (r *Runtime) Gate() flow.Gate {
	switch {
	case r.pg != nil:
		return r.pg
	case r.th == nil:
		return nil
	}
	return r.th.gate
}

// PressureGate returns the pressure gate for its statistics (nil without Pressure).
func (r *Runtime) PressureGate() *pressure.Gate {
	if r.th == nil {
		return nil
	}
	return r.th.gate
}

// Recorder returns how long each pressure level lasted (nil without Pressure).
func (r *Runtime) Recorder() *pressure.Recorder {
	if r.th == nil {
		return nil
	}
	return r.th.rec
}

// ReadBuffers returns the read buffers every source of the runtime's graphs reads
// into (package source/flowsrc takes them from the graph's runtime), or nil for
// package source's own pool.
func (r *Runtime) ReadBuffers() source.BufferProvider {
	if r.bufs == nil {
		return nil
	}
	return r.bufs
}

// Workers returns the decode-worker limiter (Workers + [WorkerSlack] at Normal); put
// [Narrow] before the decode stage.
func (r *Runtime) Workers() *Workers { return r.workers }

// Headroom returns the headroom (nil in Fixed mode).
func (r *Runtime) Headroom() *pressure.Headroom { return r.head }

// UMA returns the runtime's UMA, the one allocator of everything large the
// runtime's graphs hold: the read buffers, and whatever a pipeline adds (its
// sample cache, its GPU staging ring) with a shed action of its own
// ([Runtime.OnShed]). It is nil only where UMA cannot run (not Linux).
func (r *Runtime) UMA() *uma.UMA { return r.u }

// ErrGraphRunning is wrapped by the error of a graph started under a runtime
// while another graph of it runs.
var ErrGraphRunning = errors.New("memory runtime: another graph runs")

// Supervise runs one graph's stages (flow.Runtime; flow.Graph.Run calls it). A
// graph after the first is the next epoch: the previous graph's garbage is
// collected and the registered read pool resized before it starts. The first
// graph opens the pressure monitor, which drives the gate (with Pressure) until
// Close; while the graph runs the headroom is sampled (Elastic). It returns run's
// error once everything it started for the graph has stopped, or, under [StopBelowFloor], the [*BelowFloorError] that
// ended the graph (and ends every later graph of the runtime) because the cgroup
// left the loader less than its floor.
func (r *Runtime) Supervise(ctx context.Context, g *flow.Graph, run func(context.Context) error) error {
	r.applyMu.Lock()
	switch {
	case r.closed:
		r.applyMu.Unlock()
		return fmt.Errorf("memory runtime: graph %s: the runtime is closed", g.Name())
	case r.running != "":
		running := r.running
		r.applyMu.Unlock()
		return fmt.Errorf("%w: graph %s started while graph %s runs (one graph at a time)", ErrGraphRunning, g.Name(), running)
	}
	r.running = g.Name()
	epoch := r.graphs
	r.graphs++
	r.applyMu.Unlock()
	defer func() {
		r.applyMu.Lock()
		r.running = ""
		r.applyMu.Unlock()
	}()
	if epoch > 0 {
		if err := r.nextEpoch(); err != nil {
			return fmt.Errorf("memory runtime: before graph %s: %w", g.Name(), err)
		}
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// stopErr is set by any report applied so far, New's first sample included.
	r.applyMu.Lock()
	stopped := r.stopErr
	r.stopRun = cancel
	r.applyMu.Unlock()
	defer func() {
		r.applyMu.Lock()
		r.stopRun = nil
		r.applyMu.Unlock()
	}()
	if stopped != nil {
		return stopped
	}
	var wg sync.WaitGroup
	hctx, stop := context.WithCancel(rctx)
	if r.head != nil {
		var once sync.Once
		wg.Go(func() {
			_ = r.head.Run(hctx, r.applyHeadroom, func(err error) {
				once.Do(func() { r.info("headroom: %v (budget kept; further errors not shown)", err) })
			})
		})
	}
	var err error
	if r.th != nil {
		err = r.th.supervise(rctx, g.Name(), run)
	} else {
		err = run(rctx)
	}
	stop()
	wg.Wait()
	r.applyMu.Lock()
	stopped = r.stopErr
	r.applyMu.Unlock()
	if stopped != nil && ctx.Err() == nil {
		return stopped // the graph's own error is only its cancellation
	}
	return err
}

// nextEpoch resizes the registered read pool between two graphs (see
// [ReadBuffers.NextEpoch]); Supervise calls it before every graph but the first.
//
// In Elastic mode it also collects the previous graph's garbage first, so that the
// next graph's allocations reuse it: otherwise the Go heap peaks at two graphs' worth
// at every epoch boundary and keeps those pages (measured: the loader's memory stepped
// from 64 to 82–86 MiB at the start of epoch 2 and stayed there).
func (r *Runtime) nextEpoch() error {
	if r.cfg.Mode == Elastic {
		// Twice: the first collection moves what sync.Pools hold (decode scratch,
		// batch tensors) to their victim caches, the second frees it.
		runtime.GC()
		runtime.GC()
	}
	if r.rb == nil {
		return nil
	}
	d, err := r.rb.NextEpoch()
	if err != nil {
		return err
	}
	if r.Paused() {
		// A pause that outlasts the epoch: the new pool is not registered
		// either, and the readers of the next epoch read without it.
		r.applyMu.Lock()
		r.revokeReadPoolLocked()
		r.applyMu.Unlock()
	}
	if d > 0 {
		r.m.ran(ActionReadBuffers, d)
		r.info("read buffers: %s registered after pressure (%s unregistered)", bytesize.Human(r.rb.Registered()), bytesize.Human(d))
	}
	r.m.reg.Set(float64(r.rb.Registered()))
	return nil
}

// Level returns the pressure level last reported by the monitor.
func (r *Runtime) Level() pressure.Level { return pressure.Level(r.level.Load()) }

// Close restores the Go memory limit, closes the read buffers and UMA, and
// unregisters the metrics. It fails if a read buffer is still leased.
func (r *Runtime) Close() error {
	r.applyMu.Lock()
	r.closed = true
	r.stopNoRoomWatchLocked()
	r.stopDrainWatchLocked()
	if r.setGo {
		debug.SetMemoryLimit(r.prevGo)
		r.setGo = false
	}
	r.applyMu.Unlock()
	r.noRoom.wg.Wait()
	r.drain.wg.Wait()
	if r.th != nil {
		r.th.close() // the monitor, which outlives the graphs
	}
	var errs []error
	if r.rb != nil {
		errs = append(errs, r.rb.Close())
		r.rb = nil
	}
	if r.fixed != nil {
		errs = append(errs, r.fixed.Close())
		r.fixed = nil
	}
	if r.u != nil {
		errs = append(errs, r.u.Close())
		r.u = nil
	}
	if r.m != nil {
		r.m.unregister()
	}
	if r.unregPause != nil {
		r.unregPause()
		r.unregPause = nil
	}
	if r.pg != nil {
		r.pg.Resume() // nothing waits on a closed runtime
	}
	return errors.Join(errs...)
}

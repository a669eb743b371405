package memory

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Shed action names, the "action" label of the psiflow_shed_action_* metrics.
const (
	// ActionBudget cuts the byte budget to its floor (Full, Critical).
	ActionBudget = "budget"
	// ActionReadBuffers sends reads to the unregistered spill pool while pressure
	// lasts and re-registers a smaller pool at the next epoch.
	ActionReadBuffers = "read_buffers"
	// ActionUMAIdle gives idle UMA chunks back (MADV_DONTNEED) at Critical and while
	// the loader holds more than its allowance.
	ActionUMAIdle = "uma_idle"
	// ActionGoHeap bounds the Go heap (debug.SetMemoryLimit follows the budget and
	// the allowance) and returns it (debug.FreeOSMemory) at Critical and while the
	// loader holds more than its allowance.
	ActionGoHeap = "go_heap"
	// ActionDecodeWorkers narrows decoding while pressure lasts or the loader holds
	// more than its allowance.
	ActionDecodeWorkers = "decode_workers"
	// ActionSampleCache drops the coldest entries of a pipeline's sample cache at
	// Critical (registered with [Runtime.OnShed] by the pipeline that has one).
	ActionSampleCache = "sample_cache"
	// ActionStagingRing gives the idle slots of a pipeline's GPU staging ring back
	// at Critical (registered with [Runtime.OnShed] by the pipeline that copies to
	// a device; the ring lives in the runtime's UMA).
	ActionStagingRing = "staging_ring"
)

// ActionCHeap gives the C heap's free pages back (glibc's malloc_trim: what
// libjpeg-turbo freed stays in glibc's arenas otherwise) at Critical and while the
// loader is paused; its bytes are what left the loader's anonymous resident set.
const ActionCHeap = "c_heap"

// ActionPause pauses the reads below the floor ([PauseBelowFloor]).
const ActionPause = "pause"

// ActionProgramText unlocks and drops the program text a paused loader does not
// run ([ReleaseProgramText]); its bytes are what left the loader's resident set.
const ActionProgramText = "program_text"

// Actions lists every shed action.
var Actions = []string{ActionBudget, ActionReadBuffers, ActionUMAIdle, ActionGoHeap, ActionDecodeWorkers, ActionSampleCache, ActionStagingRing, ActionCHeap, ActionPause, ActionProgramText}

type metrics struct {
	runs     *prometheus.CounterVec
	freed    *prometheus.CounterVec
	budget   prometheus.Gauge
	allow    prometheus.Gauge
	below    prometheus.Gauge
	workers  prometheus.Gauge
	reg      prometheus.Gauge
	goLimit  prometheus.Gauge
	registry prometheus.Registerer
	all      []prometheus.Collector
	count    map[string]*atomic.Int64
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "psiflow_shed_action_runs_total",
			Help: "Times each shed action ran (budget, read_buffers, uma_idle, go_heap, decode_workers)."}, []string{"action"}),
		freed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "psiflow_shed_action_freed_bytes_total",
			Help: "Bytes each shed action gave back to the kernel or took out of the budget."}, []string{"action"}),
		budget:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "psiflow_elastic_budget_bytes", Help: "The graph's byte budget now."}),
		allow:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "psiflow_elastic_allowance_bytes", Help: "What the cgroup leaves the loader: limit minus the others' unreclaimable memory (projected) minus the reserve."}),
		below:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "psiflow_elastic_below_floor", Help: "1 while the allowance is below the loader's floor."}),
		workers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "psiflow_elastic_decode_workers", Help: "Decode workers allowed now."}),
		reg:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "psiflow_elastic_registered_read_bytes", Help: "Bytes of the read pool registered (pinned) with the io_uring rings."}),
		goLimit: prometheus.NewGauge(prometheus.GaugeOpts{Name: "psiflow_elastic_go_memory_limit_bytes", Help: "The Go runtime's soft memory limit set from the budget."}),
	}
	m.count = map[string]*atomic.Int64{}
	for _, a := range Actions {
		m.count[a] = new(atomic.Int64)
		m.runs.WithLabelValues(a)
		m.freed.WithLabelValues(a)
	}
	m.all = []prometheus.Collector{m.runs, m.freed, m.budget, m.allow, m.below, m.workers, m.reg, m.goLimit}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.all {
		if err := reg.Register(c); err != nil {
			for _, d := range m.all[:i] {
				reg.Unregister(d)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("memory: metrics already registered (one runtime per Registerer): %w", err)
			}
			return nil, fmt.Errorf("memory: metrics: %w", err)
		}
	}
	m.registry = reg
	return m, nil
}

func (m *metrics) ran(action string, freed int64) {
	m.count[action].Add(1)
	m.runs.WithLabelValues(action).Inc()
	if freed > 0 {
		m.freed.WithLabelValues(action).Add(float64(freed))
	}
}

func (m *metrics) unregister() {
	if m.registry != nil {
		for _, c := range m.all {
			m.registry.Unregister(c)
		}
	}
}

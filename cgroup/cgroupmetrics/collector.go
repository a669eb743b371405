package cgroupmetrics

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/cgroup"
)

// MinPSIInterval is the shortest time between two reads of a group's pressure files;
// scrapes closer together reuse the last values.
const MinPSIInterval = 250 * time.Millisecond

// Collector is a prometheus.Collector over one cgroup; see the package documentation
// for what it reports. It is safe for concurrent scrapes.
type Collector struct {
	g *cgroup.Group

	memCurrent, memLimit, memPeak, memBytes, majFaults, refaults *prometheus.Desc
	scanned, reclaimed, events, underOOM, stall                  *prometheus.Desc
	cpuUsage, cpuPeriods, cpuThrottled, cpuThrottledSecs         *prometheus.Desc
	pidsCurrent, pidsLimit, pidsMaxEvents                        *prometheus.Desc

	mu      sync.Mutex
	psiAt   time.Time
	psi     []psiValue
	psiErrs []error
	now     func() time.Time
}

type psiValue struct {
	resource, kind string
	total          time.Duration
}

// New returns a collector over g.
func New(g *cgroup.Group) *Collector {
	cl := prometheus.Labels{"cgroup": g.Name()}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("psiflow_cgroup_"+name, help, labels, cl)
	}
	return &Collector{
		g:                g,
		now:              time.Now,
		memCurrent:       d("memory_current_bytes", "Memory charged to the cgroup, page cache included (memory.current; v1 memory.usage_in_bytes)."),
		memLimit:         d("memory_limit_bytes", "The cgroup's own hard memory limit (memory.max; v1 memory.limit_in_bytes); absent when unlimited."),
		memPeak:          d("memory_peak_bytes", "Most memory ever charged to the cgroup (memory.peak; v1 memory.max_usage_in_bytes)."),
		memBytes:         d("memory_bytes", "Memory by type from memory.stat: anon (v1 total_rss), file (page cache; v1 total_cache), shmem, kernel (v2).", "type"),
		majFaults:        d("memory_major_faults_total", "Major page faults in the cgroup (memory.stat pgmajfault)."),
		refaults:         d("memory_workingset_refaults_total", "Refaults of pages evicted earlier (memory.stat workingset_refault_anon/file): reclaim that was undone.", "type"),
		scanned:          d("memory_scanned_pages_total", "Pages scanned by reclaim in the cgroup, by reclaimer (v2 memory.stat pgscan_*).", "reclaimer"),
		reclaimed:        d("memory_reclaimed_pages_total", "Pages reclaimed (stolen) from the cgroup, by reclaimer (v2 memory.stat pgsteal_*).", "reclaimer"),
		events:           d("memory_events_total", "memory.events counters (v1: max from memory.failcnt, oom_kill from memory.oom_control).", "event"),
		underOOM:         d("memory_under_oom", "1 while a v1 cgroup with the OOM killer disabled is stuck at its limit (memory.oom_control under_oom)."),
		stall:            d("pressure_stalled_seconds_total", "PSI stall time of the cgroup (<resource>.pressure total): kind=some, at least one task stalled; kind=full, all at once.", "resource", "kind"),
		cpuUsage:         d("cpu_usage_seconds_total", "CPU time used by the cgroup's tasks (cpu.stat usage_usec; v1 cpuacct.usage)."),
		cpuPeriods:       d("cpu_periods_total", "CPU bandwidth enforcement periods in which the cgroup was runnable (cpu.stat nr_periods)."),
		cpuThrottled:     d("cpu_throttled_periods_total", "Periods in which the cgroup used up its CPU quota (cpu.stat nr_throttled)."),
		cpuThrottledSecs: d("cpu_throttled_seconds_total", "Time the cgroup's tasks were held back by the CPU quota (cpu.stat throttled_usec; v1 throttled_time)."),
		pidsCurrent:      d("pids_current", "Tasks (processes and threads) in the cgroup (pids.current)."),
		pidsLimit:        d("pids_limit", "The cgroup's pids.max; absent when unlimited."),
		pidsMaxEvents:    d("pids_max_events_total", "Forks or clones that failed on pids.max (pids.events max)."),
	}
}

// Register registers a collector over g with reg.
func Register(reg prometheus.Registerer, g *cgroup.Group) error {
	if err := reg.Register(New(g)); err != nil {
		return fmt.Errorf("register psiflow_cgroup metrics for cgroup %s: %w", g.Name(), err)
	}
	return nil
}

// RegisterSelf registers a collector over the calling process's cgroup (see
// [cgroup.Self]) and a [Host] collector with reg.
func RegisterSelf(reg prometheus.Registerer) error {
	g, err := cgroup.Self()
	if err != nil {
		return fmt.Errorf("cgroup metrics: %w", err)
	}
	if err := Register(reg, g); err != nil {
		return err
	}
	if err := reg.Register(NewHost("/proc")); err != nil {
		return fmt.Errorf("register psiflow_host metrics: %w", err)
	}
	return nil
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.memCurrent, c.memLimit, c.memPeak, c.memBytes, c.majFaults, c.refaults,
		c.scanned, c.reclaimed, c.events, c.underOOM, c.stall, c.cpuUsage, c.cpuPeriods, c.cpuThrottled,
		c.cpuThrottledSecs, c.pidsCurrent, c.pidsLimit, c.pidsMaxEvents} {
		ch <- d
	}
}

// file is one interface file of the group: where it is and whether it is the v2 one.
type file struct {
	path string
	v2   bool
}

// find returns the first of the group's interface files that exists ([cgroup.Group.File]):
// v2name in the cgroup2 directory, else v1name in the v1 controller's directory.
func (c *Collector) find(v2name, v1ctl, v1name string) (file, bool) {
	p, v2, err := c.g.File(v2name, v1ctl, v1name)
	return file{p, v2}, err == nil
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	e := emitter{ch: ch}
	c.collectMemory(&e)
	c.collectPSI(&e)
	c.collectCPU(&e)
	c.collectPids(&e)
}

// emitter sends metrics and turns read errors into invalid metrics (so the scrape
// reports them) without stopping the other metrics.
type emitter struct{ ch chan<- prometheus.Metric }

func (e *emitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (e *emitter) counter(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

// fail reports err against d, unless the file vanished (the group was removed, or the
// host never had it): then the metric is left out.
func (e *emitter) fail(d *prometheus.Desc, err error) {
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	e.ch <- prometheus.NewInvalidMetric(d, err)
}

func (c *Collector) collectMemory(e *emitter) {
	if f, ok := c.find("memory.current", "memory", "memory.usage_in_bytes"); ok {
		if v, err := cgroup.ReadInt(f.path); err != nil {
			e.fail(c.memCurrent, err)
		} else {
			e.gauge(c.memCurrent, float64(v))
		}
	}
	if f, ok := c.find("memory.max", "memory", "memory.limit_in_bytes"); ok {
		if v, limited, err := cgroup.ReadLimit(f.path); err != nil {
			e.fail(c.memLimit, err)
		} else if limited {
			e.gauge(c.memLimit, float64(v))
		}
	}
	if f, ok := c.find("memory.peak", "memory", "memory.max_usage_in_bytes"); ok {
		if v, err := cgroup.ReadInt(f.path); err != nil {
			e.fail(c.memPeak, err)
		} else {
			e.gauge(c.memPeak, float64(v))
		}
	}
	if f, ok := c.find("memory.stat", "memory", "memory.stat"); ok {
		if st, err := cgroup.ReadMemoryStat(f.path, f.v2); err != nil {
			e.fail(c.memBytes, err)
		} else {
			c.memoryStat(e, st)
		}
	}
	c.memoryEvents(e)
}

// memoryStat reports memory.stat: hierarchical counters on both layouts
// ([cgroup.MemoryStat.Get] reads v1's total_* keys).
func (c *Collector) memoryStat(e *emitter, st cgroup.MemoryStat) {
	for _, t := range []string{"anon", "file", "shmem", "kernel"} {
		if v, ok := st.Get(t); ok {
			e.gauge(c.memBytes, float64(v), t)
		}
	}
	if v, ok := st.Get("pgmajfault"); ok {
		e.counter(c.majFaults, float64(v))
	}
	for _, t := range []string{"anon", "file"} {
		if v, ok := st.Get("workingset_refault_" + t); ok {
			e.counter(c.refaults, float64(v), t)
		}
	}
	for _, r := range reclaimers {
		if v, ok := st.Get("pgscan_" + r); ok {
			e.counter(c.scanned, float64(v), r)
		}
		if v, ok := st.Get("pgsteal_" + r); ok {
			e.counter(c.reclaimed, float64(v), r)
		}
	}
}

// reclaimers are the pgscan_*/pgsteal_* suffixes of memory.stat and /proc/vmstat.
var reclaimers = []string{"kswapd", "direct", "khugepaged", "proactive"}

func (c *Collector) memoryEvents(e *emitter) {
	if f, ok := c.find("memory.events", "", ""); ok {
		m, err := cgroup.ReadKeyed(f.path)
		if err != nil {
			e.fail(c.events, err)
			return
		}
		for _, ev := range []string{"low", "high", "max", "oom", "oom_kill", "oom_group_kill"} {
			if v, ok := m[ev]; ok {
				e.counter(c.events, float64(v), ev)
			}
		}
		return
	}
	if f, ok := c.find("", "memory", "memory.failcnt"); ok {
		if v, err := cgroup.ReadInt(f.path); err != nil {
			e.fail(c.events, err)
		} else {
			e.counter(c.events, float64(v), "max")
		}
	}
	if f, ok := c.find("", "memory", "memory.oom_control"); ok {
		m, err := cgroup.ReadKeyed(f.path)
		if err != nil {
			e.fail(c.events, err)
			return
		}
		if v, ok := m["oom_kill"]; ok {
			e.counter(c.events, float64(v), "oom_kill")
		}
		if v, ok := m["under_oom"]; ok {
			e.gauge(c.underOOM, float64(v))
		}
	}
}

// collectPSI reports the stall totals, read at most every MinPSIInterval.
func (c *Collector) collectPSI(e *emitter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); c.psiAt.IsZero() || now.Sub(c.psiAt) >= MinPSIInterval {
		c.psiAt = now
		c.psi, c.psiErrs = c.psi[:0], c.psiErrs[:0]
		for _, res := range []string{"memory", "cpu", "io"} {
			p, err := c.g.PressurePath(res)
			if err != nil {
				continue // no cgroup2 side or no PSI: left out
			}
			v, err := cgroup.ReadPSI(p)
			if err != nil {
				if !errors.Is(err, cgroup.ErrNoPSI) && !errors.Is(err, fs.ErrNotExist) {
					c.psiErrs = append(c.psiErrs, err)
				}
				continue
			}
			c.psi = append(c.psi, psiValue{res, "some", v.Some.Total})
			if v.HasFull {
				c.psi = append(c.psi, psiValue{res, "full", v.Full.Total})
			}
		}
	}
	for _, v := range c.psi {
		e.counter(c.stall, v.total.Seconds(), v.resource, v.kind)
	}
	for _, err := range c.psiErrs {
		e.fail(c.stall, err)
	}
}

func (c *Collector) collectCPU(e *emitter) {
	// The v2 cpu.stat (every cgroup2 group has usage_usec; nr_* only with the cpu
	// controller), completed from v1's cpu.stat and cpuacct.usage for what it lacks.
	have := map[string]bool{}
	if f, ok := c.find("cpu.stat", "", ""); ok {
		m, err := cgroup.ReadKeyed(f.path)
		if err != nil {
			e.fail(c.cpuUsage, err)
			return
		}
		if v, ok := m["usage_usec"]; ok {
			e.counter(c.cpuUsage, float64(v)/1e6)
			have["usage"] = true
		}
		if v, ok := m["nr_periods"]; ok {
			e.counter(c.cpuPeriods, float64(v))
			e.counter(c.cpuThrottled, float64(m["nr_throttled"]))
			e.counter(c.cpuThrottledSecs, float64(m["throttled_usec"])/1e6)
			have["throttle"] = true
		}
	}
	if !have["throttle"] {
		if f, ok := c.find("", "cpu", "cpu.stat"); ok {
			if m, err := cgroup.ReadKeyed(f.path); err != nil {
				e.fail(c.cpuPeriods, err)
			} else if v, ok := m["nr_periods"]; ok {
				e.counter(c.cpuPeriods, float64(v))
				e.counter(c.cpuThrottled, float64(m["nr_throttled"]))
				e.counter(c.cpuThrottledSecs, float64(m["throttled_time"])/1e9)
			}
		}
	}
	if !have["usage"] {
		if f, ok := c.find("", "cpuacct", "cpuacct.usage"); ok {
			if v, err := cgroup.ReadInt(f.path); err != nil {
				e.fail(c.cpuUsage, err)
			} else {
				e.counter(c.cpuUsage, float64(v)/1e9)
			}
		}
	}
}

func (c *Collector) collectPids(e *emitter) {
	if f, ok := c.find("pids.current", "pids", "pids.current"); ok {
		if v, err := cgroup.ReadInt(f.path); err != nil {
			e.fail(c.pidsCurrent, err)
		} else {
			e.gauge(c.pidsCurrent, float64(v))
		}
	}
	if f, ok := c.find("pids.max", "pids", "pids.max"); ok {
		if v, limited, err := cgroup.ReadLimit(f.path); err != nil {
			e.fail(c.pidsLimit, err)
		} else if limited {
			e.gauge(c.pidsLimit, float64(v))
		}
	}
	if f, ok := c.find("pids.events", "pids", "pids.events"); ok {
		if m, err := cgroup.ReadKeyed(f.path); err != nil {
			e.fail(c.pidsMaxEvents, err)
		} else if v, ok := m["max"]; ok {
			e.counter(c.pidsMaxEvents, float64(v))
		}
	}
}

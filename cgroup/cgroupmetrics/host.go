package cgroupmetrics

import (
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/cgroup"
)

// Host is a prometheus.Collector over the host's reclaim counters in /proc/vmstat
// (psiflow_host_memory_scanned_pages_total and psiflow_host_memory_reclaimed_pages_total,
// by reclaimer): the kswapd and direct-reclaim activity that v1 hosts do not report per
// cgroup. Counters the kernel does not have are left out.
type Host struct {
	vmstat             string
	scanned, reclaimed *prometheus.Desc
}

// NewHost returns a collector reading <proc>/vmstat.
func NewHost(proc string) *Host {
	return &Host{
		vmstat:    filepath.Join(proc, "vmstat"),
		scanned:   prometheus.NewDesc("psiflow_host_memory_scanned_pages_total", "Pages scanned by reclaim on the host, by reclaimer (/proc/vmstat pgscan_*).", []string{"reclaimer"}, nil),
		reclaimed: prometheus.NewDesc("psiflow_host_memory_reclaimed_pages_total", "Pages reclaimed (stolen) on the host, by reclaimer (/proc/vmstat pgsteal_*).", []string{"reclaimer"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (h *Host) Describe(ch chan<- *prometheus.Desc) {
	ch <- h.scanned
	ch <- h.reclaimed
}

// Collect implements prometheus.Collector.
func (h *Host) Collect(ch chan<- prometheus.Metric) {
	e := emitter{ch: ch}
	m, err := cgroup.ReadKeyed(h.vmstat)
	if err != nil {
		e.fail(h.scanned, err)
		return
	}
	for _, r := range reclaimers {
		if v, ok := m["pgscan_"+r]; ok {
			e.counter(h.scanned, float64(v), r)
		}
		if v, ok := m["pgsteal_"+r]; ok {
			e.counter(h.reclaimed, float64(v), r)
		}
	}
}

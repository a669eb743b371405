package flow

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	labelsStage = []string{"graph", "stage", "kind"}
	labelsEdge  = []string{"graph", "edge"}

	descItemsIn  = prometheus.NewDesc("psiflow_stage_items_in_total", "Elements received by the stage.", labelsStage, nil)
	descItemsOut = prometheus.NewDesc("psiflow_stage_items_out_total", "Elements sent by the stage.", labelsStage, nil)
	descErrors   = prometheus.NewDesc("psiflow_stage_errors_total", "Errors returned by the stage.", labelsStage, nil)
	descSkipped  = prometheus.NewDesc("psiflow_stage_skipped_total", "Elements the stage dropped under its skip policy (each is named in the log).", labelsStage, nil)
	descBytesIn  = prometheus.NewDesc("psiflow_stage_bytes_in_total", "Bytes received by the stage (budget claims, or Size of Sized values).", labelsStage, nil)
	descBytesOut = prometheus.NewDesc("psiflow_stage_bytes_out_total", "Bytes sent by the stage.", labelsStage, nil)
	descBusy     = prometheus.NewDesc("psiflow_stage_busy_seconds_total", "Worker time spent neither waiting for input nor for output; the bottleneck stage's grows with wall time × workers.", labelsStage, nil)
	descWaitIn   = prometheus.NewDesc("psiflow_stage_wait_input_seconds_total", "Time the stage's workers spent blocked waiting for input.", labelsStage, nil)
	descWaitOut  = prometheus.NewDesc("psiflow_stage_wait_output_seconds_total", "Time the stage's workers spent blocked waiting for room downstream.", labelsStage, nil)
	descWorkers  = prometheus.NewDesc("psiflow_stage_workers", "Goroutines doing the stage's work.", labelsStage, nil)

	descQueueDepth = prometheus.NewDesc("psiflow_edge_queue_depth", "Elements waiting in the edge's queue.", labelsEdge, nil)
	descQueueCap   = prometheus.NewDesc("psiflow_edge_queue_capacity", "Capacity of the edge's queue.", labelsEdge, nil)

	descBudgetInUse = prometheus.NewDesc("psiflow_budget_in_use_bytes", "Bytes of the graph's byte budget in use.", []string{"graph"}, nil)
	descBudgetLimit = prometheus.NewDesc("psiflow_budget_limit_bytes", "Size of the graph's byte budget.", []string{"graph"}, nil)
	descBudgetMax   = prometheus.NewDesc("psiflow_budget_max_in_use_bytes", "Most bytes of the budget ever in use at once.", []string{"graph"}, nil)
	descBudgetWait  = prometheus.NewDesc("psiflow_budget_wait_seconds_total", "Time sources spent waiting for byte budget.", []string{"graph"}, nil)
)

// collector exports a graph's counters; it reads atomics at scrape time, so
// the data path pays nothing for metrics beyond its counters.
type collector struct{ g *Graph }

// Collector returns a prometheus.Collector for the graph's per-stage,
// per-edge and budget metrics (names start with psiflow_). [WithRegistry]
// registers it for the duration of Run; use Collector to register it yourself.
func (g *Graph) Collector() prometheus.Collector { return collector{g} }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descItemsIn, descItemsOut, descErrors, descSkipped, descBytesIn, descBytesOut,
		descBusy, descWaitIn, descWaitOut, descWorkers, descQueueDepth, descQueueCap,
		descBudgetInUse, descBudgetLimit, descBudgetMax, descBudgetWait} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	g := c.g
	g.mu.Lock()
	nodes := append([]*node(nil), g.nodes...)
	edges := append([]*edgeInfo(nil), g.edges...)
	g.mu.Unlock()
	for _, n := range nodes {
		m := n.metrics
		l := []string{g.name, n.name, n.kind}
		counter := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
		}
		counter(descItemsIn, float64(m.ItemsIn.Load()))
		counter(descItemsOut, float64(m.ItemsOut.Load()))
		counter(descErrors, float64(m.Errors.Load()))
		counter(descSkipped, float64(m.Skipped.Load()))
		counter(descBytesIn, float64(m.BytesIn.Load()))
		counter(descBytesOut, float64(m.BytesOut.Load()))
		counter(descBusy, m.Busy().Seconds())
		counter(descWaitIn, float64(m.WaitIn.Load())/1e9)
		counter(descWaitOut, float64(m.WaitOut.Load())/1e9)
		ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(m.Workers.Load()), l...)
	}
	for _, e := range edges {
		if e.name == "" {
			continue
		}
		ch <- prometheus.MustNewConstMetric(descQueueDepth, prometheus.GaugeValue, float64(e.depth()), g.name, e.name)
		ch <- prometheus.MustNewConstMetric(descQueueCap, prometheus.GaugeValue, float64(e.cap), g.name, e.name)
	}
	if b := g.budget; b != nil {
		ch <- prometheus.MustNewConstMetric(descBudgetInUse, prometheus.GaugeValue, float64(b.InUse()), g.name)
		ch <- prometheus.MustNewConstMetric(descBudgetLimit, prometheus.GaugeValue, float64(b.Limit()), g.name)
		ch <- prometheus.MustNewConstMetric(descBudgetMax, prometheus.GaugeValue, float64(b.MaxInUse()), g.name)
		ch <- prometheus.MustNewConstMetric(descBudgetWait, prometheus.CounterValue, b.WaitTime().Seconds(), g.name)
	}
}

// StageStats is a snapshot of one node's counters, for progress displays.
type StageStats struct {
	Name, Kind        string
	ItemsIn, ItemsOut int64
	BytesIn, BytesOut int64
	Errors            int64
	Skipped           int64 // elements dropped under a skip policy
	Workers           int64
	Busy, WaitIn      float64 // seconds
	WaitOut           float64 // seconds
}

// Stats returns a snapshot of every node's counters, in the order the nodes
// were added.
func (g *Graph) Stats() []StageStats {
	g.mu.Lock()
	nodes := append([]*node(nil), g.nodes...)
	g.mu.Unlock()
	out := make([]StageStats, 0, len(nodes))
	for _, n := range nodes {
		m := n.metrics
		out = append(out, StageStats{
			Name: n.name, Kind: n.kind,
			ItemsIn: m.ItemsIn.Load(), ItemsOut: m.ItemsOut.Load(),
			BytesIn: m.BytesIn.Load(), BytesOut: m.BytesOut.Load(),
			Errors: m.Errors.Load(), Skipped: m.Skipped.Load(), Workers: m.Workers.Load(),
			Busy: m.Busy().Seconds(), WaitIn: float64(m.WaitIn.Load()) / 1e9, WaitOut: float64(m.WaitOut.Load()) / 1e9,
		})
	}
	return out
}

package pressure

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports a recorder and a gate as Prometheus metrics (all named
// psiflow_pressure_*):
//
//	psiflow_pressure_level                          gauge   current level (0 normal .. 3 critical)
//	psiflow_pressure_level_seconds_total{level}     counter time spent per level
//	psiflow_pressure_level_entries_total{level}     counter entries per level
//	psiflow_pressure_events_total{signal}           counter events per signal
//	psiflow_pressure_gate_permits                   gauge   current permit limit
//	psiflow_pressure_gate_permits_in_use            gauge   permits held
//	psiflow_pressure_gate_waiting                   gauge   Acquires waiting
//	psiflow_pressure_gate_decisions_total{decision} counter gate decisions
//
// Either of rec and gate may be nil; its metrics are then left out.
type Collector struct {
	rec  *Recorder
	gate *Gate
	now  func() time.Time

	level, levelSeconds, levelEntries, events *prometheus.Desc
	permits, inUse, waiting, decisions        *prometheus.Desc
}

// NewCollector returns a collector over rec and gate.
func NewCollector(rec *Recorder, gate *Gate) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("psiflow_pressure_"+name, help, labels, nil)
	}
	return &Collector{
		rec: rec, gate: gate, now: time.Now,
		level:        d("level", "Current pressure level: 0 normal, 1 some, 2 full, 3 critical."),
		levelSeconds: d("level_seconds_total", "Time spent at each pressure level.", "level"),
		levelEntries: d("level_entries_total", "Number of times each pressure level was entered.", "level"),
		events:       d("events_total", "Pressure events received, by signal.", "signal"),
		permits:      d("gate_permits", "Current permit limit of the pressure gate."),
		inUse:        d("gate_permits_in_use", "Permits of the pressure gate currently held."),
		waiting:      d("gate_waiting", "Acquires waiting at the pressure gate."),
		decisions:    d("gate_decisions_total", "Decisions of the pressure gate, by kind.", "decision"),
	}
}

// Register registers a collector over rec and gate with reg.
func Register(reg prometheus.Registerer, rec *Recorder, gate *Gate) error {
	if err := reg.Register(NewCollector(rec, gate)); err != nil {
		return fmt.Errorf("register psiflow_pressure metrics: %w", err)
	}
	return nil
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.rec != nil {
		ch <- c.level
		ch <- c.levelSeconds
		ch <- c.levelEntries
		ch <- c.events
	}
	if c.gate != nil {
		ch <- c.permits
		ch <- c.inUse
		ch <- c.waiting
		ch <- c.decisions
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.rec != nil {
		d := c.rec.Snapshot(c.now())
		ch <- prometheus.MustNewConstMetric(c.level, prometheus.GaugeValue, float64(d.Current))
		for _, st := range d.Levels {
			ch <- prometheus.MustNewConstMetric(c.levelSeconds, prometheus.CounterValue, st.Time.Seconds(), st.Level.String())
			ch <- prometheus.MustNewConstMetric(c.levelEntries, prometheus.CounterValue, float64(st.Entries), st.Level.String())
		}
		for s := SignalSome; int(s) < len(signalNames); s++ {
			ch <- prometheus.MustNewConstMetric(c.events, prometheus.CounterValue, float64(d.Signals[s]), s.String())
		}
	}
	if c.gate != nil {
		st := c.gate.Stats()
		ch <- prometheus.MustNewConstMetric(c.permits, prometheus.GaugeValue, float64(st.Limit))
		ch <- prometheus.MustNewConstMetric(c.inUse, prometheus.GaugeValue, float64(st.InUse))
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(st.Waiting))
		for _, dec := range Decisions() {
			ch <- prometheus.MustNewConstMetric(c.decisions, prometheus.CounterValue, float64(st.Decisions[dec]), dec.String())
		}
	}
}

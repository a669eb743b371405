package h2d

import "github.com/prometheus/client_golang/prometheus"

var (
	descSlots = prometheus.NewDesc("psiflow_gpu_staging_slots", "Staging ring slots: state=in_use, registered (with the device) or total.", []string{"state"}, nil)
	descRegs  = prometheus.NewDesc("psiflow_gpu_staging_registrations_total", "Device registrations of staging slots (not per batch: once per slot while the ring streams).", nil, nil)
	descGone  = prometheus.NewDesc("psiflow_gpu_staging_released_total", "Staging slots given back after their copy: how=preemptible or evicted.", []string{"how"}, nil)
	descCopy  = prometheus.NewDesc("psiflow_gpu_copies_total", "Host-to-device copies.", nil, nil)
	descBytes = prometheus.NewDesc("psiflow_gpu_copy_bytes_total", "Bytes copied host to device.", nil, nil)
)

// Describe implements prometheus.Collector (with the quota's metrics).
func (r *Ring) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSlots, descRegs, descGone, descCopy, descBytes} {
		ch <- d
	}
	r.quota.Describe(ch)
}

// Collect implements prometheus.Collector.
func (r *Ring) Collect(ch chan<- prometheus.Metric) {
	s := r.Stats()
	g, c := prometheus.GaugeValue, prometheus.CounterValue
	ch <- prometheus.MustNewConstMetric(descSlots, g, float64(s.InUse), "in_use")
	ch <- prometheus.MustNewConstMetric(descSlots, g, float64(s.Registered), "registered")
	ch <- prometheus.MustNewConstMetric(descSlots, g, float64(s.Slots), "total")
	ch <- prometheus.MustNewConstMetric(descRegs, c, float64(s.Registrations))
	ch <- prometheus.MustNewConstMetric(descGone, c, float64(s.Marked), "preemptible")
	ch <- prometheus.MustNewConstMetric(descGone, c, float64(s.Evicted), "evicted")
	ch <- prometheus.MustNewConstMetric(descCopy, c, float64(s.Copies))
	ch <- prometheus.MustNewConstMetric(descBytes, c, float64(s.CopyBytes))
	r.quota.Collect(ch)
}

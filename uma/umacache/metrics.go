package umacache

import "github.com/prometheus/client_golang/prometheus"

// Collector exports the cache's [Stats] as psiflow_cache_* metrics, labelled with
// the cache's name: hits_total, misses_total, reclaimed_total (entries the kernel
// took), evicted_total (entries the cache dropped), puts_total, entries, bytes and
// limit_bytes.
func (c *Cache) Collector() prometheus.Collector { return collector{c} }

type collector struct{ c *Cache }

var cacheDescs = func() map[string]*prometheus.Desc {
	d := map[string]*prometheus.Desc{}
	for name, help := range map[string]string{
		"hits_total":      "Cache lookups that served an intact entry.",
		"misses_total":    "Cache lookups that found no entry, or found it reclaimed.",
		"reclaimed_total": "Entries found taken by the kernel (lazily freed pages reclaimed); never served.",
		"evicted_total":   "Entries dropped by the cache itself (its limit, or shedding under pressure).",
		"puts_total":      "Entries stored.",
		"entries":         "Entries held now.",
		"bytes":           "Bytes of chunks held by entries now (charged while resident).",
		"limit_bytes":     "The cache's current limit in bytes.",
	} {
		d[name] = prometheus.NewDesc("psiflow_cache_"+name, help, []string{"cache"}, nil)
	}
	return d
}()

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range cacheDescs {
		ch <- d
	}
}

func (k collector) Collect(ch chan<- prometheus.Metric) {
	s := k.c.Stats()
	for name, v := range map[string]int64{
		"hits_total": s.Hits, "misses_total": s.Misses, "reclaimed_total": s.Reclaimed, "evicted_total": s.Evicted,
		"puts_total": s.Puts, "entries": s.Entries, "bytes": s.Bytes, "limit_bytes": s.Limit,
	} {
		t := prometheus.GaugeValue
		if len(name) > 6 && name[len(name)-6:] == "_total" {
			t = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(cacheDescs[name], t, float64(v), k.c.name)
	}
}

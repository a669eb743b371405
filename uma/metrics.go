package uma

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// faultRate counts faults in one-second buckets over the last minute, for
// the faults-per-second gauge.
type faultRate struct {
	mu      sync.Mutex
	buckets [60]int64
	secs    [60]int64
}

func (r *faultRate) add(nowNS int64) {
	s := nowNS / 1e9
	r.mu.Lock()
	defer r.mu.Unlock()
	k := s % 60
	if r.secs[k] != s {
		r.secs[k], r.buckets[k] = s, 0
	}
	r.buckets[k]++
}

// perSecond is the mean fault rate over the last 60 seconds.
func (r *faultRate) perSecond(nowNS int64) float64 {
	s := nowNS / 1e9
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for k := range r.buckets {
		if s-r.secs[k] < 60 {
			n += r.buckets[k]
		}
	}
	return float64(n) / 60
}

type metrics struct {
	reg       prometheus.Registerer
	rehydrate prometheus.Histogram
	coll      *collector
}

// collector reads the ledger at scrape time.
type collector struct {
	u                                                         *UMA
	stable, preempt, chunks, leases, version, faults, faultPS *prometheus.Desc
	rehydr, enable, mlock, bytes                              *prometheus.Desc
}

func newMetrics(u *UMA, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{reg: reg}
	m.rehydrate = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "psiflow_uma_rehydrate_seconds",
		Help:    "Latency of re-hydrating one chunk through its re-hydrate function.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50µs .. ~6.5s
	})
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("psiflow_uma_"+name, help, labels, nil)
	}
	m.coll = &collector{
		u:       u,
		stable:  d("stable_bytes", "Stable tier bytes: state=total is the tier (Config.StableBytes), state=used the bytes under stable leases.", "state"),
		preempt: d("preemptible_bytes", "Preemptible bytes: state=total is artifact memory not under a stable lease, state=marked the bytes in state PREEMPTIBLE.", "state"),
		chunks:  d("chunks", "Chunks per ledger state.", "state"),
		bytes:   d("bytes", "Bytes of arena chunks per ledger state (EVICTED: given back to the kernel, PREEMPTIBLE: the kernel may take them).", "state"),
		leases:  d("leases", "Outstanding leases per kind.", "kind"),
		version: d("ledger_version", "The monotonic ledger version."),
		faults:  d("faults_total", "PREEMPTIBLE chunks found reclaimed by the kernel when re-acquired."),
		faultPS: d("faults_per_second", "Mean rate of faults over the last 60 seconds."),
		rehydr:  d("rehydrations_total", "Chunks re-read through their re-hydrate function."),
		enable:  d("enable_preemptible", "1 when preemption is enabled (enable_preemptible)."),
		mlock:   d("mlock_enabled", "1 while pin leases still call mlock."),
	}
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{m.rehydrate, m.coll} {
		if err := reg.Register(c); err != nil {
			for _, d := range done { // only what this call registered
				reg.Unregister(d)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("uma: metrics already registered (one UMA per Registerer): %w", err)
			}
			return nil, fmt.Errorf("uma: registering metrics: %w", err)
		}
		done = append(done, c)
	}
	return m, nil
}

func (m *metrics) unregister() {
	m.reg.Unregister(m.rehydrate)
	m.reg.Unregister(m.coll)
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.stable, c.preempt, c.chunks, c.bytes, c.leases, c.version, c.faults, c.faultPS, c.rehydr, c.enable, c.mlock} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	u := c.u
	s := u.Snapshot()
	g := prometheus.GaugeValue
	ch <- prometheus.MustNewConstMetric(c.stable, g, float64(s.StableTotal), "total")
	ch <- prometheus.MustNewConstMetric(c.stable, g, float64(s.StableUsed), "used")
	ch <- prometheus.MustNewConstMetric(c.preempt, g, float64(s.PreemptibleTotal), "total")
	ch <- prometheus.MustNewConstMetric(c.preempt, g, float64(s.PreemptibleMarked), "marked")
	bytes := make(map[State]int64, len(s.States))
	for _, a := range s.Arenas {
		for _, r := range a.Chunks {
			bytes[r.State] += r.Bytes
		}
	}
	for _, st := range States() {
		ch <- prometheus.MustNewConstMetric(c.chunks, g, float64(s.States[st]), st.String())
		ch <- prometheus.MustNewConstMetric(c.bytes, g, float64(bytes[st]), st.String())
	}
	ch <- prometheus.MustNewConstMetric(c.leases, g, float64(s.Leases.Bytes), "byte")
	ch <- prometheus.MustNewConstMetric(c.leases, g, float64(s.Leases.Pins), "pin")
	ch <- prometheus.MustNewConstMetric(c.leases, g, float64(s.Leases.Stables), "stable")
	ch <- prometheus.MustNewConstMetric(c.leases, g, float64(s.Leases.Transfers), "transfer")
	ch <- prometheus.MustNewConstMetric(c.leases, g, float64(s.Registrations), "registration")
	ch <- prometheus.MustNewConstMetric(c.version, g, float64(s.Version))
	ch <- prometheus.MustNewConstMetric(c.faults, prometheus.CounterValue, float64(s.Faults))
	ch <- prometheus.MustNewConstMetric(c.faultPS, g, u.rate.perSecond(u.now()))
	ch <- prometheus.MustNewConstMetric(c.rehydr, prometheus.CounterValue, float64(s.Rehydrations))
	ch <- prometheus.MustNewConstMetric(c.enable, g, b2f(u.Preemptible()))
	ch <- prometheus.MustNewConstMetric(c.mlock, g, b2f(u.MlockEnabled()))
}

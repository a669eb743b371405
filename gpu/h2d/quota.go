package h2d

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Quota bounds the device memory a loader holds. A copy that needs device
// memory beyond it waits until batches already on the device are released.
// It is safe for concurrent use.
type Quota struct {
	mu    sync.Mutex
	limit int64
	used  int64
	peak  int64
	wake  chan struct{} // closed when memory is released

	waits    prometheus.Counter
	waitSecs prometheus.Counter
	waitedNs int64
	nwaits   int64
}

// NewQuota returns a quota of limit bytes (positive).
func NewQuota(limit int64) (*Quota, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("gpu: device memory quota %d must be positive", limit)
	}
	return &Quota{limit: limit,
		waits: prometheus.NewCounter(prometheus.CounterOpts{Name: "psiflow_gpu_quota_waits_total",
			Help: "Copies that waited because the device memory quota was full."}),
		waitSecs: prometheus.NewCounter(prometheus.CounterOpts{Name: "psiflow_gpu_quota_wait_seconds_total",
			Help: "Time copies spent waiting for the device memory quota."}),
	}, nil
}

// Acquire takes n bytes, waiting while they would exceed the limit, until ctx
// ends. A request larger than the whole limit is an error, not a wait.
func (q *Quota) Acquire(ctx context.Context, n int64) error {
	if n > q.limit {
		return fmt.Errorf("gpu: %d bytes of device memory asked for, the quota is %d", n, q.limit)
	}
	var start time.Time
	for {
		q.mu.Lock()
		if q.used+n <= q.limit {
			q.used += n
			q.peak = max(q.peak, q.used)
			q.mu.Unlock()
			q.waited(start)
			return nil
		}
		if q.wake == nil {
			q.wake = make(chan struct{})
		}
		w := q.wake
		q.mu.Unlock()
		if start.IsZero() {
			start = time.Now()
			q.waiting()
		}
		select {
		case <-w:
		case <-ctx.Done():
			return fmt.Errorf("gpu: waiting for %d bytes of device memory (%d of %d in use): %w", n, q.InUse(), q.limit, ctx.Err())
		}
	}
}

// TryAcquire takes n bytes if they fit, without waiting.
func (q *Quota) TryAcquire(n int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.used+n > q.limit {
		return false
	}
	q.used += n
	q.peak = max(q.peak, q.used)
	return true
}

// waiting counts a wait that starts now; waited adds its length once it
// ended (start is zero when nothing waited).
func (q *Quota) waiting() {
	q.mu.Lock()
	q.nwaits++
	q.mu.Unlock()
	q.waits.Inc()
}

func (q *Quota) waited(start time.Time) {
	if start.IsZero() {
		return
	}
	d := time.Since(start)
	q.waitSecs.Add(d.Seconds())
	q.mu.Lock()
	q.waitedNs += int64(d)
	q.mu.Unlock()
}

// Release gives n bytes back.
func (q *Quota) Release(n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.used -= n
	if q.used < 0 {
		panic(fmt.Sprintf("gpu: device memory quota released below zero (%d)", q.used))
	}
	if q.wake != nil {
		close(q.wake)
		q.wake = nil
	}
}

// InUse is the bytes held now.
func (q *Quota) InUse() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

// Limit is the quota.
func (q *Quota) Limit() int64 { return q.limit }

// QuotaStats is what the quota saw.
type QuotaStats struct {
	Limit, InUse, Peak int64
	// Waits counts acquisitions that had to wait; Waited is their total wait.
	Waits  int64
	Waited time.Duration
}

// Stats returns the quota's figures.
func (q *Quota) Stats() QuotaStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return QuotaStats{Limit: q.limit, InUse: q.used, Peak: q.peak, Waits: q.nwaits, Waited: time.Duration(q.waitedNs)}
}

var descQuota = prometheus.NewDesc("psiflow_gpu_quota_bytes", "Device memory quota: state=limit or used.", []string{"state"}, nil)

// Describe implements prometheus.Collector.
func (q *Quota) Describe(ch chan<- *prometheus.Desc) {
	ch <- descQuota
	q.waits.Describe(ch)
	q.waitSecs.Describe(ch)
}

// Collect implements prometheus.Collector.
func (q *Quota) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descQuota, prometheus.GaugeValue, float64(q.limit), "limit")
	ch <- prometheus.MustNewConstMetric(descQuota, prometheus.GaugeValue, float64(q.InUse()), "used")
	q.waits.Collect(ch)
	q.waitSecs.Collect(ch)
}

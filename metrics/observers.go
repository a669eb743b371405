package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psiflow/psiflow/source"
)

// Reads counts reads for [source.ReaderOptions.Observer], by backend (io_uring or pread):
//
//	psiflow_read_bytes_total{backend}          counter   bytes read
//	psiflow_read_errors_total{backend}         counter   reads that failed
//	psiflow_read_skipped_total                 counter   inputs a source skipped as bad (read skips)
//	psiflow_read_duration_seconds{backend}     histogram submit-to-completion latency of every read
type Reads struct {
	bytes, errs *prometheus.CounterVec
	skipped     prometheus.Counter
	latency     *prometheus.HistogramVec
	uring       readChildren
	pread       readChildren
}

type readChildren struct {
	bytes, errs prometheus.Counter
	latency     prometheus.Observer
}

// NewReads returns read metrics registered with reg.
func NewReads(reg prometheus.Registerer) (*Reads, error) {
	r := &Reads{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "psiflow_read_bytes_total",
			Help: "Bytes read from files and shards, by reader backend."}, []string{"backend"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "psiflow_read_errors_total",
			Help: "Reads that failed, by reader backend."}, []string{"backend"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "psiflow_read_skipped_total",
			Help: "Inputs a source skipped as bad under its skip policy (read skips: a file gone or cut short, a shard's rest, a tar member); each is named in the log."}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "psiflow_read_duration_seconds",
			Help:    "Latency of one read from submission to completion (queueing included), by reader backend.",
			Buckets: prometheus.ExponentialBuckets(5e-6, 2, 20)}, // 5µs .. 2.6s
			[]string{"backend"}),
	}
	if err := register(reg, r.bytes, r.errs, r.skipped, r.latency); err != nil {
		return nil, err
	}
	child := func(b source.Backend) readChildren {
		l := string(b)
		return readChildren{r.bytes.WithLabelValues(l), r.errs.WithLabelValues(l), r.latency.WithLabelValues(l)}
	}
	r.uring, r.pread = child(source.BackendURing), child(source.BackendPread)
	return r, nil
}

// Latency returns the read latency histogram (for tests and custom views).
func (r *Reads) Latency() prometheus.Collector { return r.latency }

// ObserveSkip counts one input a source skipped as bad (pipelines.SkipObserver).
func (r *Reads) ObserveSkip() { r.skipped.Inc() }

// ObserveRead implements source.ReadObserver.
func (r *Reads) ObserveRead(b source.Backend, n int, d time.Duration, err error) {
	c := &r.pread
	switch b {
	case source.BackendURing:
		c = &r.uring
	case source.BackendPread:
	default:
		l := string(b)
		c = &readChildren{r.bytes.WithLabelValues(l), r.errs.WithLabelValues(l), r.latency.WithLabelValues(l)}
	}
	c.bytes.Add(float64(n))
	c.latency.Observe(d.Seconds())
	if err != nil {
		c.errs.Inc()
	}
}

// Decodes counts decoded images for [decode.StageConfig.Observer]:
//
//	psiflow_decode_images_total          counter   images decoded and transformed
//	psiflow_decode_errors_total          counter   images that failed to decode
//	psiflow_decode_skipped_total         counter   images a decode stage skipped as bad (decode skips)
//	psiflow_decode_input_bytes_total     counter   encoded bytes of every image seen
//	psiflow_decode_output_bytes_total    counter   tensor bytes produced
//	psiflow_decode_duration_seconds      histogram decode + transform time per image
type Decodes struct {
	images, errs, skipped, in, out prometheus.Counter
	latency                        prometheus.Histogram
}

// NewDecodes returns decode metrics registered with reg.
func NewDecodes(reg prometheus.Registerer) (*Decodes, error) {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "psiflow_decode_" + name, Help: help})
	}
	d := &Decodes{
		images:  c("images_total", "Images decoded and transformed."),
		errs:    c("errors_total", "Images that failed to decode (stopped the stage, or were skipped under a skip policy)."),
		skipped: c("skipped_total", "Images a decode stage skipped as bad under its skip policy (decode skips); each is named in the log."),
		in:      c("input_bytes_total", "Encoded bytes of every image given to a decode stage."),
		out:     c("output_bytes_total", "Tensor bytes produced by decode stages."),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "psiflow_decode_duration_seconds",
			Help:    "Time to decode and transform one image.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16)}), // 50µs .. 1.6s
	}
	if err := register(reg, d.images, d.errs, d.skipped, d.in, d.out, d.latency); err != nil {
		return nil, err
	}
	return d, nil
}

// Images returns the psiflow_decode_images_total counter.
func (d *Decodes) Images() prometheus.Counter { return d.images }

// ObserveSkip counts one image a decode stage skipped as bad (pipelines.SkipObserver).
func (d *Decodes) ObserveSkip() { d.skipped.Inc() }

// ObserveDecode implements decode.Observer.
func (d *Decodes) ObserveDecode(encodedBytes int, tensorBytes int64, dur time.Duration, err error) {
	d.in.Add(float64(encodedBytes))
	d.latency.Observe(dur.Seconds())
	if err != nil {
		d.errs.Inc()
		return
	}
	d.images.Inc()
	d.out.Add(float64(tensorBytes))
}

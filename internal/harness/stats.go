package harness

import (
	"math"
	"slices"
	"time"

	"github.com/psiflow/psiflow/internal/harness/protocol"
)

// Metrics are what one run's batch events say about throughput and latency.
type Metrics struct {
	// Batches and Samples count every batch event and the samples in them.
	Batches int   `json:"batches"`
	Samples int64 `json:"samples"`
	// Warmup is the number of leading batches left out of the rate and the latencies
	// (the requested warm-up, capped so that at least one batch is measured).
	Warmup int `json:"warmup_batches"`
	// SamplesPerSec is the samples of the measured batches divided by the time from the
	// end of the warm-up (the last warm-up batch, or the loader's start without
	// warm-up) to the last batch.
	SamplesPerSec float64 `json:"samples_per_sec"`
	// P50 and P99 are percentiles (nearest rank) of the gaps between consecutive
	// measured batches: the time the consumer waited for each batch. The gap before the
	// first batch (start-up) is never counted.
	P50 time.Duration `json:"p50_batch_ns"`
	P99 time.Duration `json:"p99_batch_ns"`
	// MaxGap is the longest such gap.
	MaxGap time.Duration `json:"max_batch_gap_ns"`
}

// Measure computes the metrics of the batch events of one run, in the order they
// arrived, leaving out the first warmup batches. Events that are not batches are
// ignored. With fewer batches than warmup+1, the warm-up is shortened so that the
// last batch is measured; with no batches the metrics are zero.
//
// For batches b[0..k-1] at times t[i] with sizes n[i] and warm-up w (0 ≤ w < k):
//
//	samples/s = (n[w] + … + n[k-1]) / (t[k-1] − t0)   where t0 = t[w-1], or 0 when w = 0
//	gaps      = t[i] − t[i-1] for max(w, 1) ≤ i < k
func Measure(events []protocol.Event, warmup int) Metrics {
	var b []protocol.Event
	for _, ev := range events {
		if ev.Event == protocol.Batch {
			b = append(b, ev)
		}
	}
	m := Metrics{Batches: len(b)}
	for _, ev := range b {
		m.Samples += int64(ev.N)
	}
	if len(b) == 0 {
		return m
	}
	w := min(max(warmup, 0), len(b)-1)
	m.Warmup = w
	t0 := 0.0
	if w > 0 {
		t0 = b[w-1].T
	}
	var n int64
	for _, ev := range b[w:] {
		n += int64(ev.N)
	}
	if span := b[len(b)-1].T - t0; span > 0 {
		m.SamplesPerSec = float64(n) / span
	}
	var gaps []float64
	for i := max(w, 1); i < len(b); i++ {
		gaps = append(gaps, b[i].T-b[i-1].T)
	}
	slices.Sort(gaps)
	if len(gaps) > 0 {
		m.P50 = seconds(Percentile(gaps, 50))
		m.P99 = seconds(Percentile(gaps, 99))
		m.MaxGap = seconds(gaps[len(gaps)-1])
	}
	return m
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// Percentile returns the p-th percentile (0 < p ≤ 100) of sorted values by the
// nearest-rank method: the smallest value with at least p% of the values at or below
// it, the ⌈p/100 × n⌉-th. It returns NaN for no values.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Stat is the median and range of one metric over several runs.
type Stat struct {
	// N is the number of values; Median, Min and Max are NaN-free zero when N is 0.
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Summarize returns the median (the mean of the middle two for an even count), minimum
// and maximum of values.
func Summarize(values []float64) Stat {
	if len(values) == 0 {
		return Stat{}
	}
	v := slices.Clone(values)
	slices.Sort(v)
	s := Stat{N: len(v), Min: v[0], Max: v[len(v)-1]}
	if h := len(v) / 2; len(v)%2 == 1 {
		s.Median = v[h]
	} else {
		s.Median = (v[h-1] + v[h]) / 2
	}
	return s
}

package progress

import (
	"sync"
	"time"

	"github.com/psiflow/psiflow/flow"
)

// Summary is the result of a pipeline run.
type Summary struct {
	Items   int64         // samples delivered to the consumer
	Batches int64         // batches delivered
	Bytes   int64         // payload bytes read or generated
	Elapsed time.Duration // wall time of the whole run
	Peak    int64         // most budget bytes in use at once
	Skipped int64         // samples dropped under a skip policy, over all runs: ReadSkipped + DecodeSkipped
	// ReadSkipped counts the inputs the sources skipped (a file gone or cut
	// short, a shard's rest, a tar member); DecodeSkipped those the stages after
	// them skipped (images that failed to decode under on_error: skip).
	ReadSkipped, DecodeSkipped int64
	Stages                     []flow.StageStats // per-stage counters of the last graph run
	Epochs                     []Epoch           // one per pass over the data, where the pipeline has epochs
}

// Epoch is what one pass over the data delivered.
type Epoch struct {
	Items   int64         // samples delivered in this epoch
	Elapsed time.Duration // wall time of the epoch
	// CacheHits and CacheLookups count the samples served from a sample cache and
	// the samples looked up there (zero without a cache).
	CacheHits, CacheLookups int64
}

// Rate is the epoch's samples per second.
func (e Epoch) Rate() float64 {
	if e.Elapsed <= 0 {
		return 0
	}
	return float64(e.Items) / e.Elapsed.Seconds()
}

// HitRate is the share of the epoch's lookups served from the cache, in percent.
func (e Epoch) HitRate() float64 {
	if e.CacheLookups == 0 {
		return 0
	}
	return 100 * float64(e.CacheHits) / float64(e.CacheLookups)
}

// Snapshot is a live view of a running pipeline for progress displays.
type Snapshot struct {
	Items, Bytes      int64
	BudgetInUse       int64
	BudgetLimit       int64
	Elapsed           time.Duration
	Bottleneck        string  // the stage with the most busy time per worker
	BottleneckBusyPct float64 // its busy share of wall time per worker
}

// Observe fills the graph-side fields of s (budget, bottleneck) from g.
func (s *Snapshot) Observe(g *flow.Graph) {
	if g == nil {
		return
	}
	s.BudgetInUse, s.BudgetLimit = g.Budget().InUse(), g.Budget().Limit()
	s.Bottleneck, s.BottleneckBusyPct = Bottleneck(g.Stats(), s.Elapsed)
}

// Report calls progress with snapshot() every interval from a goroutine of its own,
// until the returned stop is called; stop waits for the goroutine to end. With a nil
// progress or a non-positive interval it starts nothing.
func Report(interval time.Duration, progress func(Snapshot), snapshot func() Snapshot) (stop func()) {
	if progress == nil || interval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				progress(snapshot())
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// Bottleneck names the stage whose workers were busy the largest share of elapsed,
// and that share in percent.
func Bottleneck(stats []flow.StageStats, elapsed time.Duration) (string, float64) {
	best, share := "", 0.0
	for _, s := range stats {
		if s.Workers < 1 || elapsed <= 0 {
			continue
		}
		p := 100 * s.Busy / (elapsed.Seconds() * float64(s.Workers))
		if p > share {
			best, share = s.Name, p
		}
	}
	return best, share
}

package harness

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"
)

// Plan is a side-by-side comparison: every loader at every memory limit, over several
// rounds.
type Plan struct {
	// Loaders are compared; names must be unique and non-empty.
	Loaders []Loader
	// Limits are the memory limits in bytes to compare at (0: unconstrained); none means
	// one unconstrained comparison.
	Limits []int64
	// Rounds is how many times each loader runs at each limit (default 1).
	Rounds int
	// Baseline names the loader the others are divided by in ratios (default the
	// first).
	Baseline string
	// Options apply to every run; their MemoryLimit is replaced by each of Limits.
	Options Options
}

// Report is the outcome of a comparison.
type Report struct {
	// Date is when the comparison started; Host the machine it ran on.
	Date time.Time `json:"date"`
	Host string    `json:"host"`
	// CPUs is the number of CPUs the harness saw.
	CPUs int `json:"cpus"`
	// Rounds, Warmup, Timeout, Cold and Warm repeat the plan.
	Rounds   int           `json:"rounds"`
	Warmup   int           `json:"warmup_batches"`
	Timeout  time.Duration `json:"timeout_ns"`
	Cold     bool          `json:"cold"`
	Warm     bool          `json:"warm"`
	Baseline string        `json:"baseline"`
	Loaders  []Loader      `json:"loaders"`
	// Runs are every run in the order they ran.
	Runs []Result `json:"runs"`
	// Summaries are one per loader and limit, in plan order.
	Summaries []Summary `json:"summaries"`
}

// Summary is one loader at one limit over its rounds. Throughput and latency are taken
// over finished runs only; peak memory over all runs (a run killed at its limit did use
// that memory).
type Summary struct {
	Loader   string `json:"loader"`
	Limit    int64  `json:"limit_bytes"`
	Runs     int    `json:"runs"`
	Finished int    `json:"finished"`
	// TimedOut and OOMKilled count runs with those outcomes; OOMKills counts kills
	// over all runs.
	TimedOut  int    `json:"timed_out"`
	OOMKilled int    `json:"oom_killed"`
	OOMKills  uint64 `json:"oom_kills"`
	// SamplesPerSec is in samples per second; P50 and P99 in milliseconds; Peak in bytes.
	SamplesPerSec Stat `json:"samples_per_sec"`
	P50           Stat `json:"p50_batch_ms"`
	P99           Stat `json:"p99_batch_ms"`
	Peak          Stat `json:"peak_bytes"`
	// SpeedRatio and PeakRatio are this loader's median samples/s and median peak over
	// the baseline's at the same limit (0 where either is unknown).
	SpeedRatio float64 `json:"speed_ratio"`
	PeakRatio  float64 `json:"peak_ratio"`
	// RoundRatios summarises the per-round speed ratios: this loader's samples/s over
	// the baseline's in the same round, where both finished. The two ran back to back,
	// so on a shared, noisy machine these vary less than the medians do.
	RoundRatios Stat `json:"round_speed_ratios"`
}

// Compare runs the plan. For each limit, each round runs every loader once, in plan
// order on even rounds and in reverse order on odd ones (A B, B A, A B, …), so that
// drift of a shared machine and the cost of running second fall on both sides evenly.
// progress, if set, is called after each run. A loader that fails is a result, not an
// error; Compare stops at the first harness error (or when ctx is done) and returns the
// report of the runs made so far with it.
func Compare(ctx context.Context, p Plan, progress func(Result)) (*Report, error) {
	if len(p.Loaders) == 0 {
		return nil, fmt.Errorf("harness: compare: no loaders")
	}
	seen := map[string]bool{}
	for _, l := range p.Loaders {
		if l.Name == "" || seen[l.Name] {
			return nil, fmt.Errorf("harness: compare: loader names must be unique and non-empty, got %q", l.Name)
		}
		seen[l.Name] = true
	}
	if p.Baseline == "" {
		p.Baseline = p.Loaders[0].Name
	}
	if !seen[p.Baseline] {
		return nil, fmt.Errorf("harness: compare: baseline %q is not a loader", p.Baseline)
	}
	rounds := max(p.Rounds, 1)
	limits := p.Limits
	if len(limits) == 0 {
		limits = []int64{0}
	}
	host, _ := os.Hostname()
	timeout := p.Options.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	rep := &Report{
		Date: time.Now(), Host: host, CPUs: runtime.NumCPU(), Rounds: rounds,
		Warmup: p.Options.Warmup, Timeout: timeout, Cold: p.Options.Cold, Warm: p.Options.Warm && !p.Options.Cold,
		Baseline: p.Baseline, Loaders: p.Loaders,
	}
	var err error
run:
	for _, limit := range limits {
		for r := range rounds {
			order := slices.Clone(p.Loaders)
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, l := range order {
				o := p.Options
				o.MemoryLimit = limit
				var res Result
				res, err = Run(ctx, l, o)
				res.Round = r
				if res.Group != "" {
					rep.Runs = append(rep.Runs, res)
					if progress != nil {
						progress(res)
					}
				}
				if err != nil {
					break run
				}
			}
		}
	}
	rep.Summaries = summarize(rep.Runs, p.Loaders, limits, p.Baseline)
	return rep, err
}

// summarize groups runs by loader and limit and computes the ratios to the baseline.
func summarize(runs []Result, loaders []Loader, limits []int64, baseline string) []Summary {
	var out []Summary
	for _, limit := range limits {
		limit = max(limit, 0)
		start := len(out)
		for _, l := range loaders {
			s := Summary{Loader: l.Name, Limit: limit}
			var rate, p50, p99, peak []float64
			for _, r := range runs {
				if r.Loader != l.Name || r.Limit != limit {
					continue
				}
				s.Runs++
				s.OOMKills += r.OOMKills
				peak = append(peak, float64(r.PeakBytes))
				switch r.Outcome {
				case Finished:
					s.Finished++
					rate = append(rate, r.SamplesPerSec)
					p50 = append(p50, float64(r.P50)/1e6)
					p99 = append(p99, float64(r.P99)/1e6)
				case TimedOut:
					s.TimedOut++
				case OOMKilled:
					s.OOMKilled++
				}
			}
			s.SamplesPerSec, s.P50, s.P99, s.Peak = Summarize(rate), Summarize(p50), Summarize(p99), Summarize(peak)
			out = append(out, s)
		}
		var base *Summary
		for i := start; i < len(out); i++ {
			if out[i].Loader == baseline {
				base = &out[i]
			}
		}
		for i := start; i < len(out); i++ {
			s := &out[i]
			s.RoundRatios = Summarize(roundRatios(runs, s.Loader, baseline, limit))
			if base.SamplesPerSec.N > 0 && s.SamplesPerSec.N > 0 && base.SamplesPerSec.Median > 0 {
				s.SpeedRatio = s.SamplesPerSec.Median / base.SamplesPerSec.Median
			}
			if base.Peak.N > 0 && s.Peak.N > 0 && base.Peak.Median > 0 {
				s.PeakRatio = s.Peak.Median / base.Peak.Median
			}
		}
	}
	return out
}

// roundRatios returns loader's samples/s over baseline's, round by round, at limit, for
// the rounds in which both finished.
func roundRatios(runs []Result, loader, baseline string, limit int64) []float64 {
	base := map[int]float64{}
	for _, r := range runs {
		if r.Loader == baseline && r.Limit == limit && r.Outcome == Finished && r.SamplesPerSec > 0 {
			base[r.Round] = r.SamplesPerSec
		}
	}
	var out []float64
	for _, r := range runs {
		if b, ok := base[r.Round]; ok && r.Loader == loader && r.Limit == limit && r.Outcome == Finished {
			out = append(out, r.SamplesPerSec/b)
		}
	}
	return out
}

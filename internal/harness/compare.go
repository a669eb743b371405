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
	// Options apply to every run; their MemoryLimit is replaced by each of Limits and
	// their CoTenant by one made from CoTenant and each of Shares.
	Options Options
	// Shares are the co-tenant's memory as shares of the limit, each in [0, 1) (0: the
	// loader runs alone); none means [0]. Every share runs in every round, and a share
	// above 0 needs every limit to be set. Each loader's slowdown at a share is its wall
	// time over its own alone run (share 0) in the same round.
	Shares []float64
	// CoTenant is the co-tenant's command and ramp; its Bytes and Share are set per
	// share.
	CoTenant CoTenant
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
	// Summaries are one per loader, limit and share, in plan order.
	Summaries []Summary `json:"summaries"`
	// Shares and CoTenant repeat the plan's (Shares is [0] without a co-tenant).
	Shares   []float64 `json:"cotenant_shares,omitempty"`
	CoTenant *CoTenant `json:"cotenant,omitempty"`
}

// Summary is one loader at one limit over its rounds. Throughput and latency are taken
// over finished runs only; peak memory over all runs (a run killed at its limit did use
// that memory).
type Summary struct {
	Loader string `json:"loader"`
	Limit  int64  `json:"limit_bytes"`
	// Share is the co-tenant's share of the limit (0: alone).
	Share    float64 `json:"cotenant_share"`
	Runs     int     `json:"runs"`
	Finished int     `json:"finished"`
	// TimedOut and OOMKilled count runs with those outcomes; OOMKills counts kills
	// over all runs.
	TimedOut  int `json:"timed_out"`
	OOMKilled int `json:"oom_killed"`
	// Stopped counts runs that stopped below their floor with a message ([Stopped]).
	Stopped  int    `json:"stopped_below_floor"`
	OOMKills uint64 `json:"oom_kills"`
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
	// CoTenantOOMKilled counts runs in which the OOM killer chose the co-tenant;
	// CoTenantHarnessKilled those in which the harness killed it (the run timed out);
	// LoaderOOMKills counts the kills of the loader's processes over all runs.
	CoTenantOOMKilled     int    `json:"cotenant_oom_killed"`
	CoTenantHarnessKilled int    `json:"cotenant_harness_killed"`
	LoaderOOMKills        uint64 `json:"loader_oom_kills"`
	// Slowdown is the loader's wall time over its alone run's (share 0) in the same
	// round, over the rounds in which both finished.
	Slowdown Stat `json:"slowdown_vs_alone"`
	// PSISome and PSIFull are the group's memory stall totals over each run, in percent
	// of its wall time; Fluctuation the steady-state memory.current stddev/mean in
	// percent (over runs with at least MinSteadySamples samples in steady state).
	PSISome     Stat `json:"psi_some_pct"`
	PSIFull     Stat `json:"psi_full_pct"`
	Fluctuation Stat `json:"fluctuation_pct"`
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
	shares := p.Shares
	if len(shares) == 0 {
		shares = []float64{0}
	}
	withCo := false
	seenShare := map[float64]bool{}
	for _, sh := range shares {
		if !(sh >= 0 && sh < 1) || seenShare[sh] {
			return nil, fmt.Errorf("harness: compare: co-tenant share %v: want distinct shares in [0, 1)", sh)
		}
		seenShare[sh] = true
		withCo = withCo || sh > 0
	}
	if withCo {
		if len(p.CoTenant.Argv) == 0 {
			return nil, fmt.Errorf("harness: compare: co-tenant shares %v need a co-tenant command", shares)
		}
		for _, l := range limits {
			if l <= 0 {
				return nil, fmt.Errorf("harness: compare: a co-tenant share of the limit needs a memory limit, got an unconstrained one")
			}
		}
	}
	host, _ := os.Hostname()
	timeout := p.Options.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	rep := &Report{
		Date: time.Now(), Host: host, CPUs: runtime.NumCPU(), Rounds: rounds,
		Warmup: p.Options.Warmup, Timeout: timeout, Cold: p.Options.Cold, Warm: p.Options.Warm && !p.Options.Cold,
		Baseline: p.Baseline, Loaders: p.Loaders, Shares: shares,
	}
	if withCo {
		c := p.CoTenant
		c.Bytes, c.Share = 0, 0
		rep.CoTenant = &c
	}
	var err error
run:
	for _, limit := range limits {
		for r := range rounds {
			for si, share := range shares {
				order := slices.Clone(p.Loaders)
				if (r*len(shares)+si)%2 == 1 {
					slices.Reverse(order)
				}
				for _, l := range order {
					o := p.Options
					o.MemoryLimit = limit
					o.CoTenant = nil
					if share > 0 {
						c := p.CoTenant
						c.Share, c.Bytes = share, int64(share*float64(limit))
						o.CoTenant = &c
					}
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
	}
	rep.Summaries = summarize(rep.Runs, p.Loaders, limits, shares, p.Baseline)
	return rep, err
}

// summarize groups runs by limit, share and loader and computes the ratios to the
// baseline and to each loader's alone runs.
func summarize(runs []Result, loaders []Loader, limits []int64, shares []float64, baseline string) []Summary {
	var out []Summary
	for _, limit := range limits {
		for _, share := range shares {
			out = append(out, summarizeBlock(runs, loaders, max(limit, 0), share, baseline)...)
		}
	}
	return out
}

func summarizeBlock(runs []Result, loaders []Loader, limit int64, share float64, baseline string) []Summary {
	var out []Summary
	for _, l := range loaders {
		s := Summary{Loader: l.Name, Limit: limit, Share: share}
		var rate, p50, p99, peak, psiSome, psiFull, fluct []float64
		for _, r := range runs {
			if r.Loader != l.Name || r.Limit != limit || r.Share != share {
				continue
			}
			s.Runs++
			s.OOMKills += r.OOMKills
			s.LoaderOOMKills += r.LoaderOOMKills
			if r.CoTenant != nil {
				switch r.CoTenant.Fate {
				case CoOOMKilled:
					s.CoTenantOOMKilled++
				case CoHarnessKilled:
					s.CoTenantHarnessKilled++
				}
			}
			if r.PSI != nil {
				psiSome = append(psiSome, r.PSI.SomePct)
				psiFull = append(psiFull, r.PSI.FullPct)
			}
			if r.Steady.N >= MinSteadySamples {
				fluct = append(fluct, 100*r.Steady.CV)
			}
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
			case Stopped:
				s.Stopped++
			}
		}
		s.SamplesPerSec, s.P50, s.P99, s.Peak = Summarize(rate), Summarize(p50), Summarize(p99), Summarize(peak)
		s.PSISome, s.PSIFull, s.Fluctuation = Summarize(psiSome), Summarize(psiFull), Summarize(fluct)
		if share > 0 {
			s.Slowdown = Summarize(slowdowns(runs, l.Name, limit, share))
		}
		out = append(out, s)
	}
	var base *Summary
	for i := range out {
		if out[i].Loader == baseline {
			base = &out[i]
		}
	}
	for i := range out {
		s := &out[i]
		s.RoundRatios = Summarize(roundRatios(runs, s.Loader, baseline, limit, share))
		if base.SamplesPerSec.N > 0 && s.SamplesPerSec.N > 0 && base.SamplesPerSec.Median > 0 {
			s.SpeedRatio = s.SamplesPerSec.Median / base.SamplesPerSec.Median
		}
		if base.Peak.N > 0 && s.Peak.N > 0 && base.Peak.Median > 0 {
			s.PeakRatio = s.Peak.Median / base.Peak.Median
		}
	}
	return out
}

// roundRatios returns loader's samples/s over baseline's, round by round, at limit and
// share, for the rounds in which both finished.
func roundRatios(runs []Result, loader, baseline string, limit int64, share float64) []float64 {
	base := map[int]float64{}
	for _, r := range runs {
		if r.Loader == baseline && r.Limit == limit && r.Share == share && r.Outcome == Finished && r.SamplesPerSec > 0 {
			base[r.Round] = r.SamplesPerSec
		}
	}
	var out []float64
	for _, r := range runs {
		if b, ok := base[r.Round]; ok && r.Loader == loader && r.Limit == limit && r.Share == share && r.Outcome == Finished {
			out = append(out, r.SamplesPerSec/b)
		}
	}
	return out
}

// slowdowns returns loader's wall time at limit and share over its wall time alone
// (share 0) at limit, round by round, for the rounds in which both finished.
func slowdowns(runs []Result, loader string, limit int64, share float64) []float64 {
	alone := map[int]float64{}
	for _, r := range runs {
		if r.Loader == loader && r.Limit == limit && r.Share == 0 && r.Outcome == Finished && r.Wall > 0 {
			alone[r.Round] = float64(r.Wall)
		}
	}
	var out []float64
	for _, r := range runs {
		if a, ok := alone[r.Round]; ok && r.Loader == loader && r.Limit == limit && r.Share == share && r.Outcome == Finished {
			out = append(out, float64(r.Wall)/a)
		}
	}
	return out
}

package harness

// Summary is one loader at one limit over its rounds. Throughput and latency are taken
// over finished runs only; peak memory over all runs (a run killed at its limit did use
// that memory).
type Summary struct {
	Loader string `json:"loader"`
	Limit  int64  `json:"limit_bytes"`
	// Share is the co-tenant's share of the limit (0: alone); Shape its cell
	// ([Shape].String) and Label the cell for tables.
	Share    float64 `json:"cotenant_share"`
	Shape    string  `json:"cotenant_shape"`
	Label    string  `json:"cotenant_label"`
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
	// SpeedVsAlone is the loader's samples/s over its alone run's in the same round,
	// over the rounds in which both finished.
	SpeedVsAlone Stat `json:"speed_vs_alone"`
	// Pauses counts the loader's pauses over all runs; Paused is the time paused per
	// run in seconds.
	Pauses int  `json:"pauses"`
	Paused Stat `json:"paused_s"`
	// KeysChecked counts runs whose loader sent keys, ExactlyOnce those in which
	// every delivered sample arrived exactly once ([KeyCheck]).
	KeysChecked int `json:"keys_checked"`
	ExactlyOnce int `json:"exactly_once"`
	// For a spike: SpikeRuns counts finished runs with a finished alone run in the
	// same round, WithinSpike those whose wall time was at most the alone run's plus
	// 1.5 × the spike's hold; Excess is the wall time over the alone run's, in
	// seconds.
	SpikeRuns   int  `json:"spike_runs,omitempty"`
	WithinSpike int  `json:"within_spike_bound,omitempty"`
	Excess      Stat `json:"excess_s"`
}

// SpikeSlack is the wall time a spike may add to a loader's run, in units of the
// spike's hold: a loader that pauses for the spike and resumes when it ends loses
// the hold, plus a share of it for the fall of its pools and their refill.
const SpikeSlack = 1.5

// summarize groups runs by limit, co-tenant cell and loader and computes the ratios
// to the baseline and to each loader's alone runs.
func summarize(runs []Result, loaders []Loader, limits []int64, cells []Shape, baseline string) []Summary {
	var out []Summary
	for _, limit := range limits {
		for _, cell := range cells {
			out = append(out, summarizeBlock(runs, loaders, max(limit, 0), cell, baseline)...)
		}
	}
	return out
}

// runCell returns the key of a run's co-tenant cell; runs of reports written before
// shapes existed have only a share, which was a ramp.
func runCell(r Result) string {
	if r.Shape != "" {
		return r.Shape
	}
	return ShareShape(r.Share).String()
}

// aloneKey is the key of the alone cell.
var aloneKey = Shape{Kind: Alone}.String()

func summarizeBlock(runs []Result, loaders []Loader, limit int64, cell Shape, baseline string) []Summary {
	key := cell.String()
	var out []Summary
	for _, l := range loaders {
		s := Summary{Loader: l.Name, Limit: limit, Share: cell.Share, Shape: key, Label: cell.Label()}
		var rate, p50, p99, peak, psiSome, psiFull, fluct, paused []float64
		for _, r := range runs {
			if r.Loader != l.Name || r.Limit != limit || runCell(r) != key {
				continue
			}
			s.Runs++
			s.OOMKills += r.OOMKills
			s.LoaderOOMKills += r.LoaderOOMKills
			switch {
			case r.TrainerOOMKilled:
				s.CoTenantOOMKilled++
			case r.CoTenant != nil && r.CoTenant.Fate == CoOOMKilled:
				s.CoTenantOOMKilled++
			case r.CoTenant != nil && r.CoTenant.Fate == CoHarnessKilled:
				s.CoTenantHarnessKilled++
			}
			if r.PSI != nil {
				psiSome = append(psiSome, r.PSI.SomePct)
				psiFull = append(psiFull, r.PSI.FullPct)
			}
			if r.Steady.N >= MinSteadySamples {
				fluct = append(fluct, 100*r.Steady.CV)
			}
			s.Pauses += r.Pauses
			paused = append(paused, r.Paused.Seconds())
			if ok, known := r.Keys.ExactlyOnce(); known {
				s.KeysChecked++
				if ok {
					s.ExactlyOnce++
				}
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
		s.Paused = Summarize(paused)
		if cell.Kind != Alone {
			pairs := alonePairs(runs, l.Name, limit, key)
			var slow, speed, excess []float64
			for _, pr := range pairs {
				slow = append(slow, float64(pr.run.Wall)/float64(pr.alone.Wall))
				if pr.alone.SamplesPerSec > 0 {
					speed = append(speed, pr.run.SamplesPerSec/pr.alone.SamplesPerSec)
				}
				excess = append(excess, (pr.run.Wall - pr.alone.Wall).Seconds())
				if cell.Kind == Spike {
					s.SpikeRuns++
					if float64(pr.run.Wall-pr.alone.Wall) <= SpikeSlack*float64(cell.Hold) {
						s.WithinSpike++
					}
				}
			}
			s.Slowdown, s.SpeedVsAlone, s.Excess = Summarize(slow), Summarize(speed), Summarize(excess)
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
		s.RoundRatios = Summarize(roundRatios(runs, s.Loader, baseline, limit, key))
		if base.SamplesPerSec.N > 0 && s.SamplesPerSec.N > 0 && base.SamplesPerSec.Median > 0 {
			s.SpeedRatio = s.SamplesPerSec.Median / base.SamplesPerSec.Median
		}
		if base.Peak.N > 0 && s.Peak.N > 0 && base.Peak.Median > 0 {
			s.PeakRatio = s.Peak.Median / base.Peak.Median
		}
	}
	return out
}

// roundRatios returns loader's samples/s over baseline's, round by round, at limit in
// cell, for the rounds in which both finished.
func roundRatios(runs []Result, loader, baseline string, limit int64, cell string) []float64 {
	base := map[int]float64{}
	for _, r := range runs {
		if r.Loader == baseline && r.Limit == limit && runCell(r) == cell && r.Outcome == Finished && r.SamplesPerSec > 0 {
			base[r.Round] = r.SamplesPerSec
		}
	}
	var out []float64
	for _, r := range runs {
		if b, ok := base[r.Round]; ok && r.Loader == loader && r.Limit == limit && runCell(r) == cell && r.Outcome == Finished {
			out = append(out, r.SamplesPerSec/b)
		}
	}
	return out
}

// alonePair is a run in a co-tenant cell and the same loader's alone run at the same
// limit in the same round.
type alonePair struct{ run, alone Result }

// alonePairs returns loader's finished runs at limit in cell, each with its finished
// alone run of the same round.
func alonePairs(runs []Result, loader string, limit int64, cell string) []alonePair {
	alone := map[int]Result{}
	for _, r := range runs {
		if r.Loader == loader && r.Limit == limit && runCell(r) == aloneKey && r.Outcome == Finished && r.Wall > 0 {
			alone[r.Round] = r
		}
	}
	var out []alonePair
	for _, r := range runs {
		if a, ok := alone[r.Round]; ok && r.Loader == loader && r.Limit == limit && runCell(r) == cell && r.Outcome == Finished {
			out = append(out, alonePair{run: r, alone: a})
		}
	}
	return out
}

package harness

import (
	"math"
	"time"

	"github.com/psiflow/psiflow/pressure"
)

// MinSteadySamples is the fewest memory samples a steady-state window needs for its
// fluctuation to be reported.
const MinSteadySamples = 10

// Fluctuation is how much the group's memory.current moved in a run's steady state.
type Fluctuation struct {
	// CV is the coefficient of variation of the samples in the window: their standard
	// deviation (population) over their mean. It is 0 when N < MinSteadySamples.
	CV float64 `json:"cv"`
	// Mean is the samples' mean in bytes.
	Mean float64 `json:"mean_bytes"`
	// N is the number of samples in the window.
	N int `json:"samples"`
	// From and To bound the window in seconds since the run's start.
	From float64 `json:"from_s"`
	To   float64 `json:"to_s"`
}

// SteadyFluctuation computes the fluctuation of the memory samples taken from from to
// to (seconds since the run's start, both included). The steady state of a run starts
// when the loader's warm-up is over and the co-tenant, if any, holds all its memory,
// and ends at the loader's last batch; see [Run].
func SteadyFluctuation(points []Point, from, to float64) Fluctuation {
	f := Fluctuation{From: from, To: to}
	var sum float64
	for _, p := range points {
		if p.T >= from && p.T <= to {
			f.N++
			sum += float64(p.Bytes)
		}
	}
	if f.N == 0 {
		return f
	}
	f.Mean = sum / float64(f.N)
	if f.N < MinSteadySamples || f.Mean <= 0 {
		return f
	}
	var ss float64
	for _, p := range points {
		if p.T >= from && p.T <= to {
			d := float64(p.Bytes) - f.Mean
			ss += d * d
		}
	}
	f.CV = math.Sqrt(ss/float64(f.N)) / f.Mean
	return f
}

// PSITotals is how long the tasks of a run's group were stalled on memory during the
// run, from the totals of its memory.pressure file.
type PSITotals struct {
	// Some and Full are the growth of the "some" and "full" totals over the run.
	Some time.Duration `json:"some_ns"`
	Full time.Duration `json:"full_ns"`
	// SomePct and FullPct are Some and Full as percentages of Wall.
	SomePct float64 `json:"some_pct"`
	FullPct float64 `json:"full_pct"`
	// Wall is the time the totals were taken over.
	Wall time.Duration `json:"wall_ns"`
	// Path is the pressure file read.
	Path string `json:"path"`
}

// psiDelta returns the growth of the stall totals from a to b over wall.
func psiDelta(a, b pressure.PSI, wall time.Duration, path string) PSITotals {
	t := PSITotals{Some: max(b.Some.Total-a.Some.Total, 0), Full: max(b.Full.Total-a.Full.Total, 0), Wall: wall, Path: path}
	if wall > 0 {
		t.SomePct = 100 * float64(t.Some) / float64(wall)
		t.FullPct = 100 * float64(t.Full) / float64(wall)
	}
	return t
}

// steadyWindow computes the fluctuation of memory.current from the arrival of the last
// warm-up batch (the first batch without warm-up), or the co-tenant's held event if
// later, to the arrival of the last batch. A co-tenant that never held its memory
// leaves no steady state.
func steadyWindow(timeline []Point, arrived []float64, warmup int, co *coProc) Fluctuation {
	if len(arrived) == 0 {
		return Fluctuation{}
	}
	from := arrived[max(warmup-1, 0)]
	to := arrived[len(arrived)-1]
	if co != nil {
		h := co.heldAt()
		if h == 0 {
			return Fluctuation{}
		}
		from = max(from, h.Seconds())
	}
	if from >= to {
		return Fluctuation{From: from, To: to}
	}
	return SteadyFluctuation(timeline, from, to)
}

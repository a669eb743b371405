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
	// loader runs alone), each a [Ramp] to that share ([ShareShape]); they come before
	// Shapes. Without either, the loaders run alone. Every share and shape runs in
	// every round, and any but alone needs every limit to be set. Each loader's
	// slowdown in a cell is its wall time over its own alone run in the same round.
	Shares []float64
	// Shapes are further co-tenant cells: ramps, spikes and trainers ([Shape]). A
	// [Trainer] shape needs every loader to take [BallastArg].
	Shapes []Shape
	// CoTenant is the co-tenant's command and ramp (for ramps and spikes); its Bytes,
	// Share, Hold and After are set per cell.
	CoTenant CoTenant
}

// cells returns the plan's co-tenant cells: its shares as ramps, then its shapes;
// none means alone.
func (p Plan) cells() ([]Shape, error) {
	var out []Shape
	seen := map[string]bool{}
	for _, sh := range p.Shares {
		if !(sh >= 0 && sh < 1) {
			return nil, fmt.Errorf("harness: compare: co-tenant share %v: want a share in [0, 1)", sh)
		}
		out = append(out, ShareShape(sh))
	}
	for _, sh := range p.Shapes {
		if err := sh.Validate(); err != nil {
			return nil, fmt.Errorf("harness: compare: %w", err)
		}
		out = append(out, sh)
	}
	for _, sh := range out {
		if seen[sh.String()] {
			return nil, fmt.Errorf("harness: compare: co-tenant %s given twice", sh)
		}
		seen[sh.String()] = true
	}
	if len(out) == 0 {
		out = []Shape{{Kind: Alone}}
	}
	return out, nil
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
	// Prewarm repeats Options.Prewarm: the command run before each run.
	Prewarm []string `json:"prewarm,omitempty"`
	Loaders []Loader `json:"loaders"`
	// Runs are every run in the order they ran.
	Runs []Result `json:"runs"`
	// Summaries are one per loader, limit and share, in plan order.
	Summaries []Summary `json:"summaries"`
	// Shapes are the co-tenant cells in plan order ([alone] without a co-tenant);
	// Shares repeats their shares (a spike's peak, a trainer's ballast); CoTenant the
	// plan's co-tenant command (nil when no cell has a co-tenant or a trainer).
	Shapes   []Shape   `json:"cotenant_shapes,omitempty"`
	Shares   []float64 `json:"cotenant_shares,omitempty"`
	CoTenant *CoTenant `json:"cotenant,omitempty"`
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
	cells, err := p.cells()
	if err != nil {
		return nil, err
	}
	withCo, withProc := false, false
	for _, c := range cells {
		withCo = withCo || c.Kind != Alone
		withProc = withProc || c.needsCoTenant()
		if c.Kind == Trainer {
			for _, l := range p.Loaders {
				if !hasBallastArg(l) {
					return nil, fmt.Errorf("harness: compare: co-tenant %s: loader %s is not a trainer: its arguments need %s", c, l.Name, BallastArg)
				}
			}
		}
	}
	if withProc && len(p.CoTenant.Argv) == 0 {
		return nil, fmt.Errorf("harness: compare: co-tenant cells need a co-tenant command")
	}
	if withCo {
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
		Baseline: p.Baseline, Loaders: p.Loaders, Shapes: cells, Prewarm: p.Options.Prewarm,
	}
	for _, c := range cells {
		rep.Shares = append(rep.Shares, c.Share)
	}
	if withCo {
		c := p.CoTenant
		c.Bytes, c.Share, c.Hold, c.After, c.AfterShare = 0, 0, 0, 0, 0
		rep.CoTenant = &c
	}
run:
	for _, limit := range limits {
		for r := range rounds {
			for si, cell := range cells {
				order := slices.Clone(p.Loaders)
				if (r*len(cells)+si)%2 == 1 {
					slices.Reverse(order)
				}
				for _, l := range order {
					o := cellOptions(p.Options, p.CoTenant, limit, cell)
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
	rep.Summaries = summarize(rep.Runs, p.Loaders, limits, cells, p.Baseline)
	return rep, err
}

// cellOptions returns the options of one run at limit in cell: the co-tenant of a
// ramp or spike, the ballast of a trainer.
func cellOptions(o Options, co CoTenant, limit int64, cell Shape) Options {
	o.MemoryLimit = limit
	o.CoTenant = nil
	o.Ballast = 0
	o.Shape = cell.String()
	switch cell.Kind {
	case Ramp, Spike:
		c := co
		c.Share, c.Bytes = cell.Share, int64(cell.Share*float64(limit))
		c.Hold, c.AfterShare, c.After = 0, 0, 0
		if cell.Kind == Spike {
			c.Hold, c.AfterShare, c.After = cell.Hold, cell.After, int64(cell.After*float64(limit))
		}
		o.CoTenant = &c
	case Trainer:
		o.Ballast = int64(cell.Share * float64(limit))
	}
	return o
}

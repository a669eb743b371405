package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/psiflow/psiflow/cgroup"
)

var (
	runSeq     atomic.Uint64
	unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.]+`)
)

// Run runs one loader in a fresh cgroup under o and measures it. The loader is started
// blocked and moved into the group before it runs (cgroup.Group.Start), so everything
// it and its children allocate is charged there; the group is killed when the timeout
// passes or ctx is done, and removed before Run returns, also on failure.
//
// A loader that fails, is OOM-killed or times out is a Result with that Outcome, not an
// error. Errors are the harness's own failures (no cgroups, a program that cannot be
// started, dropping the cache) and ctx's error when ctx ended the run; the Result then
// holds what was measured until then.
func Run(ctx context.Context, l Loader, o Options) (res Result, err error) {
	if len(l.Argv) == 0 {
		return Result{}, fmt.Errorf("harness: loader %q: empty command", l.Name)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.SampleInterval <= 0 {
		o.SampleInterval = DefaultSampleInterval
	}
	if o.GroupPrefix == "" {
		o.GroupPrefix = DefaultGroupPrefix
	}
	if o.Ballast < 0 {
		return Result{}, fmt.Errorf("harness: loader %q: ballast %d bytes: must not be negative", l.Name, o.Ballast)
	}
	if o.Ballast > 0 && !hasBallastArg(l) {
		return Result{}, fmt.Errorf("harness: loader %q: a trainer's ballast needs %s in its arguments", l.Name, BallastArg)
	}
	res = Result{Loader: l.Name, Limit: max(o.MemoryLimit, 0), Cold: o.Cold, Warm: o.Warm && !o.Cold, DoneSamples: -1, ExitCode: -1,
		Shape: o.Shape, Ballast: o.Ballast}
	if o.CoTenant != nil && o.CoTenant.Bytes <= 0 {
		o.CoTenant = nil
	}
	if o.CoTenant != nil {
		res.Share = o.CoTenant.Share
	} else if o.Ballast > 0 && o.MemoryLimit > 0 {
		res.Share = float64(o.Ballast) / float64(o.MemoryLimit)
	}
	// The blocked start execs the program only after moving it into the group, where a
	// missing program shows up as exit status 127; find it first to fail clearly.
	if _, err := exec.LookPath(l.Argv[0]); err != nil {
		return res, fmt.Errorf("harness: loader %q: %w", l.Name, err)
	}
	switch {
	case o.Cold:
		if err := DropCache(o.Data); err != nil {
			return res, fmt.Errorf("harness: loader %q: cold run: %w", l.Name, err)
		}
	case o.Warm:
		if err := WarmCache(o.Data); err != nil {
			return res, fmt.Errorf("harness: loader %q: warm run: %w", l.Name, err)
		}
	}
	if len(o.Prewarm) > 0 {
		if err := Prewarm(ctx, o.Prewarm, o.Timeout); err != nil {
			return res, fmt.Errorf("harness: loader %q: %w", l.Name, err)
		}
	}
	res.Group = fmt.Sprintf("%s-%s-%d-%d", o.GroupPrefix, unsafeName.ReplaceAllString(l.Name, "_"), runSeq.Add(1), os.Getpid())
	g, err := cgroup.New(res.Group)
	if err != nil {
		return res, fmt.Errorf("harness: loader %q: %w", l.Name, err)
	}
	defer func() {
		if rerr := g.Remove(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("harness: loader %q: %w", l.Name, rerr))
		}
	}()
	if o.MemoryLimit > 0 {
		if err := g.SetMemoryMax(o.MemoryLimit); err != nil {
			return res, fmt.Errorf("harness: loader %q: %w", l.Name, err)
		}
	}
	err = run(ctx, g, l, o, &res)
	return res, err
}

// run starts the co-tenant (if any) and the loader in g, waits for the loader (or the
// timeout, or ctx), stops everything and fills in res.
func run(ctx context.Context, g *cgroup.Group, l Loader, o Options, res *Result) error {
	lp, err := newLoaderProc(l, loaderArgv(l, o.Ballast))
	if err != nil {
		return fmt.Errorf("harness: loader %q: %w", l.Name, err)
	}
	psi := openPSI(g)
	res.Start = time.Now()
	start := res.Start
	var co *coProc
	if o.CoTenant != nil {
		if co, err = startCoTenant(g, *o.CoTenant, start); err != nil {
			lp.abort()
			return fmt.Errorf("harness: loader %q: %w", l.Name, err)
		}
	}
	if err := lp.start(g, start, o.Stderr); err != nil {
		lp.close()
		if co != nil {
			co.markStopping()
			co.stop()
		}
		return fmt.Errorf("harness: loader %q: %w", l.Name, err)
	}
	defer lp.close()
	smp := startSampler(g, o.SampleInterval, start)
	var psiAt psiEnd
	end := lp.await(ctx, start.Add(o.Timeout), func() {
		// What must be read the moment the loader is gone (or about to be killed):
		// the wall time, the stall totals, and whether the co-tenant still lives.
		res.Wall = time.Since(start)
		psiAt = psi.end()
		if co != nil {
			co.markStopping()
		}
	}, func() error {
		if co != nil {
			co.markKilled()
		}
		return g.Kill(killGrace)
	})
	if co != nil {
		co.stop()
	}
	psi.fill(psiAt, res.Wall, res)
	// Whatever the loader left behind (worker processes, a daemon) goes now.
	if procs, err := g.Procs(); err == nil {
		res.Leftover = len(procs)
	}
	if res.Leftover > 0 {
		end.killErr = errors.Join(end.killErr, g.Kill(killGrace))
	}
	lp.drain(drainGrace)
	peak, timeline := smp.finish()
	res.PeakSampled = peak
	if o.Timeline {
		res.Memory = timeline
	}
	res.PeakFile, res.PeakSource = filePeak(g)
	res.PeakBytes = max(res.PeakFile, res.PeakSampled)
	if res.PeakFile == 0 || res.PeakSampled > res.PeakFile {
		res.PeakSource = "memory.current samples"
	}
	if ev, err := g.MemoryEvents(); err == nil {
		res.OOMKills = ev.OOMKill
	}
	res.StderrTail = lp.tail.String()
	res.ExitCode = exitCode(end.waitErr)
	attributeKills(res, co, hasBallastArg(l) && !end.timedOut && end.ctxErr == nil && killedBySIGKILL(end.waitErr))
	res.fromLog(&lp.log, o, timeline, co, end)
	if end.ctxErr != nil {
		return fmt.Errorf("harness: loader %q: %w", l.Name, end.ctxErr)
	}
	return nil
}

// attributeKills splits the group's OOM kills between the co-tenant (its process, or
// a trainer's own process when trainerKilled: a trainer died of a SIGKILL the
// harness did not send) and the loader.
func attributeKills(res *Result, co *coProc, trainerKilled bool) {
	res.LoaderOOMKills = res.OOMKills
	if co != nil {
		cr := co.finish(res.OOMKills)
		res.CoTenant = &cr
		if cr.Fate == CoOOMKilled {
			res.CoTenantOOMKills = 1
		}
	}
	if trainerKilled && res.OOMKills > res.CoTenantOOMKills {
		res.TrainerOOMKilled = true
		res.CoTenantOOMKills++
	}
	res.LoaderOOMKills = res.OOMKills - res.CoTenantOOMKills
}

// fromLog fills in what the loader's output says: throughput and latency, the steady
// state, its done event, pauses, the exactly-once check, and the outcome.
func (res *Result) fromLog(lg *loaderLog, o Options, timeline []Point, co *coProc, end loaderEnd) {
	res.Ignored = lg.ignored
	res.Metrics = Measure(lg.events, o.Warmup)
	res.Steady = steadyWindow(timeline, lg.arrived, res.Metrics.Warmup, co)
	done := lg.done()
	if done != nil {
		res.DoneSamples = done.Samples
	}
	// A trainer OOM-killed ended the job as surely as the loader's own kill.
	kills := res.LoaderOOMKills
	if res.TrainerOOMKilled {
		kills = res.OOMKills
	}
	res.Outcome, res.Detail, res.Said = classify(end.timedOut, end.ctxErr != nil, kills, end.waitErr, done, o.Timeout, res.StderrTail)
	res.Pauses, res.Paused = Pauses(lg.events)
	res.Keys = CheckKeys(lg.events, res.Outcome == Finished)
	if len(lg.perrs) > 0 {
		res.Detail = strings.TrimSpace(res.Detail + "; " + fmt.Sprintf("%d bad protocol lines, first: %v", len(lg.perrs), lg.perrs[0]))
	}
	if end.killErr != nil {
		res.Detail = strings.TrimSpace(res.Detail + "; " + end.killErr.Error())
	}
}

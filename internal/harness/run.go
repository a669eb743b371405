package harness

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/harness/protocol"
	"github.com/psiflow/psiflow/pressure"
)

// Defaults for [Options].
const (
	// DefaultTimeout bounds a run when Options.Timeout is zero.
	DefaultTimeout = 10 * time.Minute
	// DefaultSampleInterval is how often memory.current is sampled (20 Hz).
	DefaultSampleInterval = 50 * time.Millisecond
	// DefaultGroupPrefix starts the names of the cgroups the harness creates.
	DefaultGroupPrefix = "bench"
	// killGrace is how long the harness waits for a killed group to empty.
	killGrace = 10 * time.Second
	// drainGrace is how long output pipes may stay open after the group was emptied.
	drainGrace = 5 * time.Second
	// stderrTail is how many bytes of a loader's standard error a result keeps.
	stderrTail = 2048
)

// Loader is a program that loads a dataset and speaks package
// [github.com/psiflow/psiflow/internal/harness/protocol] on its standard output.
type Loader struct {
	// Name labels the loader in reports ("dataloader", "psiflow").
	Name string `json:"name"`
	// Argv is the command: the program (looked up in PATH when it has no slash) and its
	// arguments.
	Argv []string `json:"argv"`
	// Env is added to the harness's own environment ("KEY=value").
	Env []string `json:"env,omitempty"`
	// Dir is the working directory ("" for the harness's).
	Dir string `json:"dir,omitempty"`
}

// Options configure runs.
type Options struct {
	// MemoryLimit is the cgroup's hard memory limit in bytes; 0 or less runs
	// unconstrained (the group still measures peak memory and OOM kills).
	MemoryLimit int64
	// Timeout bounds a run's wall-clock time from its start; when it passes, every
	// process in the group is killed and the run reported as [TimedOut]. Zero means
	// [DefaultTimeout].
	Timeout time.Duration
	// Warmup is the number of leading batches left out of throughput and latency.
	Warmup int
	// Cold drops the page cache of Data before each run (see [DropCache]); the
	// loader's reads then come from the disk and their page cache is charged to the
	// run's group.
	Cold bool
	// Warm reads Data before each run (see [WarmCache]), so the loader finds it in the
	// page cache, charged to the harness's cgroup rather than the run's: the loader's
	// peak then excludes the dataset's cache. Cold wins when both are set.
	Warm bool
	// Data lists the dataset's files, for Cold and Warm.
	Data []string
	// SampleInterval is how often memory.current is sampled (DefaultSampleInterval when
	// zero).
	SampleInterval time.Duration
	// GroupPrefix starts the names of the run groups (DefaultGroupPrefix when empty).
	// Names are "<prefix>-<loader>-<seq>-<pid>", so that cgroup.Tree.RemoveStale(prefix)
	// sweeps the groups of a harness that was killed.
	GroupPrefix string
	// Stderr, if set, receives a copy of the loader's standard error.
	Stderr io.Writer
	// Timeline keeps the sampled memory usage of each run in Result.Memory.
	Timeline bool
	// CoTenant, if set with positive Bytes, is started in the run's group just before
	// the loader (blocked until it is in the group, like the loader), ramps its memory
	// and holds it until the loader has ended; see [CoTenant] and Result.CoTenant.
	CoTenant *CoTenant
}

// Outcome is how a run ended.
type Outcome string

// Outcomes.
const (
	// Finished: the loader wrote a done event without error and exited with status 0.
	Finished Outcome = "finished"
	// TimedOut: the run passed Options.Timeout and its group was killed.
	TimedOut Outcome = "timeout"
	// OOMKilled: the kernel's OOM killer killed a process of the group and the loader
	// did not finish.
	OOMKilled Outcome = "oom-killed"
	// Stopped: the loader stopped on its own because its cgroup left it less than its
	// floor (exit status [protocol.ExitBelowFloor], psiflow's -below-floor stop), with no OOM
	// kill of its own: it yielded to the co-tenant with a message instead of dying.
	Stopped Outcome = "stopped"
	// Failed: the loader exited without finishing for another reason.
	Failed Outcome = "failed"
)

// Point is one memory sample.
type Point struct {
	// T is seconds since the run started.
	T float64 `json:"t"`
	// Bytes is the group's memory.current (v1: memory.usage_in_bytes).
	Bytes int64 `json:"bytes"`
}

// Result is one run of one loader.
type Result struct {
	// Loader is the loader's name; Round its round in a comparison (0 for a single run).
	Loader string `json:"loader"`
	Round  int    `json:"round"`
	// Limit is the memory limit in bytes (0: unconstrained); Cold whether the page cache
	// of the data was dropped first.
	Limit int64 `json:"limit_bytes"`
	Cold  bool  `json:"cold"`
	Warm  bool  `json:"warm"`
	// Group is the cgroup the run used (removed afterwards).
	Group string `json:"group"`
	// Start is when the loader was started; Wall the time until it exited (or was
	// killed), start-up included.
	Start time.Time     `json:"start"`
	Wall  time.Duration `json:"wall_ns"`
	// Outcome is how the run ended; Detail says more when it did not finish (exit
	// status, the done event's error, the last line of standard error).
	Outcome Outcome `json:"outcome"`
	Detail  string  `json:"detail,omitempty"`
	// ExitCode is the loader's exit status, or -1 when it was killed by a signal.
	ExitCode int `json:"exit_code"`
	// Metrics are computed from the batch events (see [Measure]).
	Metrics
	// DoneSamples is the loader's own total from its done event (-1 without one).
	DoneSamples int64 `json:"done_samples"`
	// PeakBytes is the group's peak memory: the larger of PeakFile and PeakSampled.
	PeakBytes int64 `json:"peak_bytes"`
	// PeakFile is the kernel's own peak counter (v1 memory.max_usage_in_bytes, v2
	// memory.peak), 0 where the kernel has none; PeakSource names the file, or
	// "memory.current samples".
	PeakFile   int64  `json:"peak_file_bytes"`
	PeakSource string `json:"peak_source"`
	// PeakSampled is the largest memory.current sample.
	PeakSampled int64 `json:"peak_sampled_bytes"`
	// OOMKills counts processes of the group killed by the OOM killer, the co-tenant's
	// included.
	OOMKills uint64 `json:"oom_kills"`
	// LoaderOOMKills counts those that were the loader's (OOMKills minus the
	// co-tenant's); CoTenantOOMKills is 1 when the OOM killer chose the co-tenant.
	LoaderOOMKills   uint64 `json:"loader_oom_kills"`
	CoTenantOOMKills uint64 `json:"cotenant_oom_kills"`
	// CoTenant is what became of the co-tenant (nil without one); Share repeats its
	// share of the limit (0 without one).
	CoTenant *CoTenantResult `json:"cotenant,omitempty"`
	Share    float64         `json:"cotenant_share"`
	// PSI is the group's memory stall over the run, from memory.pressure at the start
	// and when the loader ended (nil where the group has no such file; PSIError says
	// why).
	PSI      *PSITotals `json:"psi,omitempty"`
	PSIError string     `json:"psi_error,omitempty"`
	// Steady is the fluctuation of memory.current in the run's steady state: from the
	// end of the warm-up (and the co-tenant's ramp) to the loader's last batch.
	Steady Fluctuation `json:"steady"`
	// Leftover counts processes still in the group after the loader exited (killed
	// by the harness).
	Leftover int `json:"leftover_processes"`
	// Ignored counts standard-output lines that were not protocol lines.
	Ignored int `json:"ignored_lines"`
	// Memory is the sampled usage when Options.Timeline is set.
	Memory []Point `json:"memory,omitempty"`
	// StderrTail is the end of the loader's standard error.
	StderrTail string `json:"stderr_tail,omitempty"`
}

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
	res = Result{Loader: l.Name, Limit: max(o.MemoryLimit, 0), Cold: o.Cold, Warm: o.Warm && !o.Cold, DoneSamples: -1, ExitCode: -1}
	if o.CoTenant != nil && o.CoTenant.Bytes <= 0 {
		o.CoTenant = nil
	}
	if o.CoTenant != nil {
		res.Share = o.CoTenant.Share
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

func run(ctx context.Context, g *cgroup.Group, l Loader, o Options, res *Result) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("harness: loader %q: stdout pipe: %w", l.Name, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fmt.Errorf("harness: loader %q: stderr pipe: %w", l.Name, err)
	}
	defer outR.Close()
	defer errR.Close()
	psiPath := ""
	var psi0 pressure.PSI
	if d := g.V2Dir(); d != "" {
		psiPath = filepath.Join(d, "memory.pressure")
		if psi0, err = pressure.ReadPSI(psiPath); err != nil {
			res.PSIError = err.Error()
			psiPath = ""
		}
	} else {
		res.PSIError = "the group has no cgroup2 directory, so no memory.pressure"
	}
	cmd := exec.Command(l.Argv[0], l.Argv[1:]...)
	cmd.Env = append(os.Environ(), l.Env...)
	cmd.Dir = l.Dir
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.Stdin = nil
	res.Start = time.Now()
	var co *coProc
	if o.CoTenant != nil {
		if co, err = startCoTenant(g, *o.CoTenant, res.Start); err != nil {
			outW.Close()
			errW.Close()
			return fmt.Errorf("harness: loader %q: %w", l.Name, err)
		}
	}
	err = g.Start(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		if co != nil {
			co.markStopping()
			co.stop()
		}
		return fmt.Errorf("harness: loader %q: %w", l.Name, err)
	}
	start := res.Start

	// Readers of the two pipes and the memory sampler.
	var (
		wg      sync.WaitGroup
		events  []protocol.Event
		arrived []float64 // seconds since start at which each batch event arrived
		perrs   []error
		ignored int
		tail    tailBuffer
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		br := bufio.NewReaderSize(outR, 64<<10)
		for {
			line, rerr := br.ReadBytes('\n')
			if len(line) > 0 {
				ev, ok, perr := protocol.Parse(line)
				switch {
				case perr != nil:
					perrs = append(perrs, perr)
				case ok:
					events = append(events, ev)
					if ev.Event == protocol.Batch {
						arrived = append(arrived, time.Since(start).Seconds())
					}
				default:
					ignored++
				}
			}
			if rerr != nil {
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		var w io.Writer = &tail
		if o.Stderr != nil {
			w = io.MultiWriter(&tail, o.Stderr)
		}
		_, _ = io.Copy(w, errR)
	}()
	stopSampler := make(chan struct{})
	samplerDone := make(chan struct{})
	var sampled int64
	var timeline []Point
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(o.SampleInterval)
		defer tick.Stop()
		for {
			if v, err := g.MemoryCurrent(); err == nil {
				sampled = max(sampled, v)
				timeline = append(timeline, Point{T: time.Since(start).Seconds(), Bytes: v})
			}
			select {
			case <-stopSampler:
				return
			case <-tick.C:
			}
		}
	}()

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	timer := time.NewTimer(o.Timeout - time.Since(start))
	defer timer.Stop()
	var waitErr, killErr, ctxErr error
	var psi1 pressure.PSI
	var psiErr error
	// ended takes what must be read the moment the loader is gone (or about to be
	// killed): the wall time, the stall totals, and whether the co-tenant still lives.
	ended := func() {
		res.Wall = time.Since(start)
		if psiPath != "" {
			psi1, psiErr = pressure.ReadPSI(psiPath)
		}
		if co != nil {
			co.markStopping()
		}
	}
	killGroup := func() {
		if co != nil {
			co.markKilled()
		}
		killErr = g.Kill(killGrace)
	}
	timedOut := false
	select {
	case waitErr = <-waited:
		ended()
	case <-timer.C:
		timedOut = true
		ended()
		killGroup()
		waitErr = <-waited
	case <-ctx.Done():
		ctxErr = ctx.Err()
		ended()
		killGroup()
		waitErr = <-waited
	}
	if co != nil {
		co.stop()
	}
	switch {
	case psiErr != nil:
		res.PSIError = psiErr.Error()
	case psiPath != "":
		t := psiDelta(psi0, psi1, res.Wall, psiPath)
		res.PSI = &t
	}
	// Whatever the loader left behind (worker processes, a daemon) goes now.
	if procs, err := g.Procs(); err == nil {
		res.Leftover = len(procs)
	}
	if res.Leftover > 0 {
		killErr = errors.Join(killErr, g.Kill(killGrace))
	}
	// The pipes close when the last process holding them is gone; if something outside
	// the group still holds them, stop reading after a grace period.
	readersDone := make(chan struct{})
	go func() { wg.Wait(); close(readersDone) }()
	select {
	case <-readersDone:
	case <-time.After(drainGrace):
		outR.Close()
		errR.Close()
		<-readersDone
	}
	close(stopSampler)
	<-samplerDone
	res.PeakSampled = sampled
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
	res.LoaderOOMKills = res.OOMKills
	if co != nil {
		cr := co.finish(res.OOMKills)
		res.CoTenant = &cr
		if cr.Fate == CoOOMKilled {
			res.CoTenantOOMKills = 1
			res.LoaderOOMKills = res.OOMKills - 1
		}
	}
	res.StderrTail = tail.String()
	res.Ignored = ignored
	res.Metrics = Measure(events, o.Warmup)
	res.Steady = steadyWindow(timeline, arrived, res.Metrics.Warmup, co)
	var done *protocol.Event
	for i := range events {
		if events[i].Event == protocol.Done {
			done = &events[i]
		}
	}
	if done != nil {
		res.DoneSamples = done.Samples
	}
	res.ExitCode = exitCode(waitErr)
	res.Outcome, res.Detail = classify(timedOut, ctxErr != nil, res.LoaderOOMKills, waitErr, done, o.Timeout, res.StderrTail)
	if len(perrs) > 0 {
		res.Detail = strings.TrimSpace(res.Detail + "; " + fmt.Sprintf("%d bad protocol lines, first: %v", len(perrs), perrs[0]))
	}
	if killErr != nil {
		res.Detail = strings.TrimSpace(res.Detail + "; " + killErr.Error())
	}
	if ctxErr != nil {
		return fmt.Errorf("harness: loader %q: %w", l.Name, ctxErr)
	}
	return nil
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

// classify decides a run's outcome.
func classify(timedOut, canceled bool, oomKills uint64, waitErr error, done *protocol.Event, timeout time.Duration, stderr string) (Outcome, string) {
	switch {
	case timedOut:
		return TimedOut, fmt.Sprintf("did not finish within %v; the group was killed", timeout)
	case canceled:
		return Failed, "canceled; the group was killed"
	}
	clean := waitErr == nil && done != nil && done.Error == ""
	if clean {
		return Finished, ""
	}
	var why []string
	if waitErr != nil {
		why = append(why, waitErr.Error())
	}
	switch {
	case done == nil:
		why = append(why, "no done event")
	case done.Error != "":
		why = append(why, "loader error: "+done.Error)
	}
	if last := lastLine(stderr); last != "" {
		why = append(why, "stderr: "+last)
	}
	if oomKills > 0 {
		return OOMKilled, fmt.Sprintf("%d OOM kills; %s", oomKills, strings.Join(why, "; "))
	}
	if exitCode(waitErr) == protocol.ExitBelowFloor {
		return Stopped, strings.Join(why, "; ")
	}
	return Failed, strings.Join(why, "; ")
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1
		}
		return ee.ExitCode()
	}
	return -1
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// filePeak reads the kernel's peak usage counter of the group: v1
// memory.max_usage_in_bytes, else v2 memory.peak (Linux 5.19+). It returns 0 and "" where
// neither exists.
func filePeak(g *cgroup.Group) (int64, string) {
	var paths []string
	if d, err := g.V1Dir("memory"); err == nil {
		paths = append(paths, filepath.Join(d, "memory.max_usage_in_bytes"))
	}
	if d := g.V2Dir(); d != "" {
		paths = append(paths, filepath.Join(d, "memory.peak"))
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64); err == nil {
			return v, filepath.Base(p)
		}
	}
	return 0, ""
}

// tailBuffer keeps the last stderrTail bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > stderrTail {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-stderrTail:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/gpu/nvml"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/internal/flagval"
	"github.com/psiflow/psiflow/internal/stopsig"
)

func init() {
	register(command{
		name:    "cgroup run",
		summary: "run a command in a new cgroup with memory, cpu and pids limits, as its subreaper",
		run:     runCgroupRun,
	})
	register(command{
		name:    "cgroup show",
		summary: "show the cgroup layout and this process's (or a PID's) limits, usage and events",
		run:     runCgroupShow,
	})
}

// Ranges of the cgroup run flags: beyond them the kernel would refuse the value or it
// would mean nothing (a quota of more CPUs than any machine has).
const (
	maxMemory = 1 << 50 // 1 PiB
	maxCPUs   = 4096
	maxPids   = 1 << 22 // the kernel's PID_MAX_LIMIT
)

const cgroupRunUsage = `Usage: psiflow cgroup run [flags] -- command [args...]

Runs command in a new cgroup (psiflow/<name>) with the limits given, as its
subreaper; forwards SIGTERM, SIGINT and SIGHUP to it and kills every process in
the group if it has not exited -grace after the first; removes the group and
prints its usage and events when the command ends.

Exit status: the command's own (as timeout and env pass it through); 128 plus
the signal's number when a signal killed it (137 when the group was killed after
the grace period); 127 when the command cannot be found or executed; 2 for bad
flags; 1 when the group cannot be made or set up.

Flags:
`

func runCgroupRun(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("cgroup run", stdout)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), cgroupRunUsage)
		fs.PrintDefaults()
	}
	name := fs.String("name", "", "group name under psiflow/ (default run-<pid>)")
	memMax := flagval.Size(fs, "memory-max", flagval.None, flagval.None, maxMemory, "hard memory limit (e.g. 8GiB; max for none)")
	memHigh := flagval.Size(fs, "memory-high", flagval.None, flagval.None, maxMemory, "memory throttling limit (v2 memory.high; v1 soft limit; max for none)")
	cpus := flagval.Float(fs, "cpus", 0, 0, maxCPUs, "cpu quota in CPUs (e.g. 1.5), at most 4096; 0 for none")
	adaptive := fs.String("adaptive-cpus", "", "adapt the cpu quota between MIN:MAX CPUs (raise 10% when throttled >500ms/s, lower when idle)")
	followGPU := fs.Bool("follow-gpu", false, "with -adaptive-cpus MIN:MAX: the cpu quota follows GPU utilisation (NVML, all devices' mean) instead of throttling")
	weight := flagval.Int64(fs, "cpu-weight", 0, 0, 10000, "cpu weight 1-10000 (v1: converted to shares); 0 to leave")
	pidsMax := flagval.Int64(fs, "pids-max", -1, -1, maxPids, "task limit; -1 for none")
	grace := flagval.Duration(fs, "grace", defaultGrace, 0, 24*time.Hour, "after forwarding SIGTERM or SIGINT to the command, how long to wait before killing every process in the group")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return fmt.Errorf("%w: no command to run (psiflow cgroup run [flags] -- command args...)", errUsage)
	}
	var minC, maxC float64
	if *adaptive != "" {
		var err error
		if minC, maxC, err = flagval.Range(*adaptive, 0.01, maxCPUs); err != nil {
			return fmt.Errorf("%w: -adaptive-cpus: %v (want MIN:MAX CPUs, 0.01 to 4096)", errUsage, err)
		}
	}
	if *followGPU && *adaptive == "" {
		return fmt.Errorf("%w: -follow-gpu needs -adaptive-cpus MIN:MAX, the bounds the quota follows the GPU between", errUsage)
	}
	var gpuMon *nvml.Monitor
	if *followGPU {
		m, err := nvml.Open()
		if err != nil {
			return fmt.Errorf("-follow-gpu: %w", err)
		}
		defer m.Close()
		gpuMon = m
	}
	if *name == "" {
		*name = "run-" + strconv.Itoa(os.Getpid())
	}
	g, cleanup, err := newLauncherGroup("cgroup run", *name)
	if err != nil {
		return err
	}
	defer cleanup()
	if err := applyLimits(g, *memMax, *memHigh, *cpus, uint64(*weight), *pidsMax); err != nil {
		return err
	}
	var ctl quotaRunner
	if gpuMon != nil {
		ctl = gpuFollower(g, gpuMon, minC, maxC)
	} else if *adaptive != "" {
		p := cgroup.DefaultCPUPeriod
		qc, err := cgroup.NewQuotaController(g, cgroup.QuotaConfig{
			Min: time.Duration(minC * float64(p)), Max: time.Duration(maxC * float64(p)),
			OnChange: func(d cgroup.QuotaDecision) {
				fmt.Fprintf(os.Stderr, "psiflow cgroup run: cpu quota %.2f -> %.2f CPUs (%s)\n", float64(d.Old)/float64(p), float64(d.New)/float64(p), d.Reason)
			},
		})
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		ctl = qc
	}
	return runInGroup(ctx, stdout, g, argv, ctl, *grace)
}

// quotaRunner adjusts a group's CPU quota until its context ends: the throttling
// controller of -adaptive-cpus, or the GPU follower of -follow-gpu.
type quotaRunner interface {
	Run(ctx context.Context) error
}

// gpuFollower makes g's cpu quota follow the mean GPU utilisation between minC and
// maxC CPUs (gpu/nvml.Follow), saying every change on standard error.
func gpuFollower(g *cgroup.Group, m *nvml.Monitor, minC, maxC float64) quotaRunner {
	p := cgroup.DefaultCPUPeriod
	return runFunc(func(ctx context.Context) error {
		return nvml.Follow(ctx, g, m, nvml.FollowConfig{
			Min: time.Duration(minC * float64(p)), Max: time.Duration(maxC * float64(p)), Period: p,
			OnChange: func(d nvml.FollowDecision) {
				fmt.Fprintf(os.Stderr, "psiflow cgroup run: cpu quota %.2f -> %.2f CPUs (GPU %.0f%% busy)\n", float64(d.Old)/float64(p), float64(d.New)/float64(p), 100*d.Utilization)
			},
		})
	})
}

type runFunc func(ctx context.Context) error

func (f runFunc) Run(ctx context.Context) error { return f(ctx) }

func applyLimits(g *cgroup.Group, memMax, memHigh int64, cpus float64, weight uint64, pidsMax int64) error {
	if memMax >= 0 {
		if err := g.SetMemoryMax(memMax); err != nil {
			return err
		}
	}
	if memHigh >= 0 {
		if err := g.SetMemoryHigh(memHigh); err != nil {
			return err
		}
	}
	if cpus > 0 {
		if err := g.SetCPUMax(time.Duration(cpus*float64(cgroup.DefaultCPUPeriod)), cgroup.DefaultCPUPeriod); err != nil {
			return err
		}
	}
	if weight > 0 {
		if err := g.SetCPUWeight(weight); err != nil {
			return err
		}
	}
	if pidsMax >= 0 {
		if err := g.SetPidsMax(pidsMax); err != nil {
			return err
		}
	}
	return nil
}

// runInGroup starts argv in g as this process's child, reaps orphans while it runs,
// reports forks refused by pids.max, forwards SIGTERM, SIGINT and SIGHUP to it (a
// cancelled ctx counts as SIGTERM) and kills the group when the command has not exited
// grace after the first, and prints a summary of the group's usage and events.
func runInGroup(ctx context.Context, stdout io.Writer, g *cgroup.Group, argv []string, ctl quotaRunner, grace time.Duration) error {
	subreaper := cgroup.SetChildSubreaper(true) == nil
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, os.Stderr
	gc := prepareGroupedCommand("cgroup run", g, cmd, grace)
	start := time.Now()
	if err := gc.start(); err != nil {
		var pe *fs.PathError
		if errors.Is(err, exec.ErrNotFound) || errors.As(err, &pe) && pe.Op == "fork/exec" {
			return &exitStatusError{code: 127, err: err} // as env says it (the blocked start's trampoline too)
		}
		return err
	}
	child := cmd.Process.Pid
	bg, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	var workers int
	launch := func(f func()) {
		workers++
		go func() { defer func() { done <- struct{}{} }(); f() }()
	}
	if subreaper {
		r := cgroup.NewReaper(func(pid int) bool { return pid == child }, nil)
		launch(func() { _ = r.Run(bg, time.Second) })
	}
	launch(func() {
		_ = cgroup.WatchPids(bg, g, 0, func(total, delta uint64) {
			fmt.Fprintf(os.Stderr, "psiflow cgroup run: %d forks refused by pids.max (%d in all)\n", delta, total)
		})
	})
	if ctl != nil {
		launch(func() {
			if err := ctl.Run(bg); err != nil && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "psiflow cgroup run: %v\n", err)
			}
		})
	}
	var rep stopReport
	launch(func() { rep = gc.supervise(ctx, bg.Done(), os.Stderr) })
	waitErr := cmd.Wait()
	stop()
	for range workers {
		<-done
	}
	if subreaper {
		_ = cgroup.SetChildSubreaper(false)
	}
	printGroupSummary(stdout, g, time.Since(start))
	if rep.signal != nil && !rep.killed && waitErr == nil {
		fmt.Fprintf(os.Stderr, "psiflow cgroup run: %s exited with status 0 %v after %s\n", argv[0], rep.after.Round(time.Millisecond), stopsig.Name(rep.signal))
	}
	return rep.err(g, argv[0], waitErr)
}

func printGroupSummary(w io.Writer, g *cgroup.Group, elapsed time.Duration) {
	fmt.Fprintf(w, "cgroup %s (%s): ran %v", g.Name(), g.Layout(), elapsed.Round(time.Millisecond))
	if ev, err := g.MemoryEvents(); err == nil {
		fmt.Fprintf(w, "; memory max events %d, oom kills %d", ev.Max, ev.OOMKill)
	}
	if st, err := g.CPUStat(); err == nil {
		if st.Usage >= 0 {
			fmt.Fprintf(w, "; cpu %v", st.Usage.Round(time.Millisecond))
		}
		fmt.Fprintf(w, ", throttled %d/%d periods (%v)", st.Throttled, st.Periods, st.ThrottledTime.Round(time.Millisecond))
	}
	if n, err := g.PidsEvents(); err == nil {
		fmt.Fprintf(w, "; forks refused %d", n)
	}
	fmt.Fprintln(w)
}

func runCgroupShow(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("cgroup show", stdout)
	pid := flagval.Int(fs, "pid", 0, 0, maxPids, "show this process's cgroup instead of psiflow's own")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	tree, err := cgroup.DefaultTree()
	if err != nil {
		return err
	}
	var g *cgroup.Group
	if *pid > 0 {
		g, err = tree.Process(*pid)
	} else {
		g, err = tree.Self()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "layout: %s\n", tree.Layout())
	fmt.Fprintf(stdout, "group: %s\n", g.Name())
	if d := g.V2Dir(); d != "" {
		fmt.Fprintf(stdout, "  cgroup2: %s\n", d)
	}
	for _, c := range []string{"memory", "cpu", "cpuacct", "pids", "blkio"} {
		if d, err := g.V1Dir(c); err == nil {
			fmt.Fprintf(stdout, "  v1 %s: %s\n", c, d)
		}
	}
	show := func(label string, f func() (string, error)) {
		v, err := f()
		if err != nil {
			v = "unavailable: " + err.Error()
		}
		fmt.Fprintf(stdout, "%s: %s\n", label, v)
	}
	show("memory limit", func() (string, error) {
		b, limited, err := g.MemoryLimit()
		if !limited {
			return "none", err
		}
		return bytesize.Human(b), err
	})
	show("effective memory limit", func() (string, error) {
		if *pid > 0 {
			return "", errors.New("only for psiflow itself")
		}
		b, src, err := tree.SelfMemoryLimit()
		return bytesize.Human(b) + " from " + src, err
	})
	show("memory current", func() (string, error) { b, err := g.MemoryCurrent(); return bytesize.Human(b), err })
	show("memory events", func() (string, error) { ev, err := g.MemoryEvents(); return fmt.Sprintf("%+v", ev), err })
	show("cpu max", func() (string, error) {
		q, p, limited, err := g.CPUMax()
		if !limited {
			return "none", err
		}
		return fmt.Sprintf("%v per %v (%.2f CPUs)", q, p, float64(q)/float64(p)), err
	})
	show("cpu weight", func() (string, error) { w, err := g.CPUWeight(); return strconv.FormatUint(w, 10), err })
	show("cpu stat", func() (string, error) { st, err := g.CPUStat(); return fmt.Sprintf("%+v", st), err })
	show("pids", func() (string, error) {
		n, err := g.PidsCurrent()
		if err != nil {
			return "", err
		}
		ev, err := g.PidsEvents()
		return fmt.Sprintf("%d tasks, %d forks refused", n, ev), err
	})
	show("memory.pressure", func() (string, error) { return g.PressurePath("memory") })
	return nil
}

// sweepOrphans removes the psiflow groups whose owner process is gone (a launcher or
// benchmark killed before it could remove its group), saying which.
func sweepOrphans(cmd string) {
	tree, err := cgroup.DefaultTree()
	if err != nil {
		return
	}
	removed, err := tree.RemoveOrphans()
	if len(removed) > 0 {
		fmt.Fprintf(os.Stderr, "psiflow %s: removed groups left by processes that are gone: %s\n", cmd, strings.Join(removed, ", "))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "psiflow %s: %v\n", cmd, err)
	}
}

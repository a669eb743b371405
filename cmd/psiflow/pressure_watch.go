package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/flagval"
	"github.com/psiflow/psiflow/pressure"
)

func init() {
	register(command{
		name:    "pressure watch",
		summary: "stream memory-pressure levels and events of a cgroup live",
		run:     runPressureWatch,
	})
}

// triggerList is a repeatable --trigger flag.
type triggerList []pressure.Trigger

func (l *triggerList) String() string {
	s := make([]string, len(*l))
	for i, t := range *l {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

func (l *triggerList) Set(v string) error {
	t, err := pressure.ParseTrigger(v)
	if err != nil {
		return err
	}
	*l = append(*l, t)
	return nil
}

// syncWriter serialises lines written by the monitor goroutine and the status ticker.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, format, args...)
}

func runPressureWatch(ctx context.Context, stdout io.Writer, args []string) error {
	fs := newFlagSet("pressure watch", stdout)
	cgPath := fs.String("cgroup", "", "cgroup to watch, relative to the hierarchy roots (e.g. psiflow/job1); default: this process's own")
	interval := flagval.Duration(fs, "interval", time.Second, time.Nanosecond, time.Hour, "time between status lines, and the polling interval where triggers and vmpressure are unavailable (at least 100ms)")
	duration := flagval.Duration(fs, "duration", 0, 0, 1<<62, "stop after this long (0: until interrupted)")
	var trigs triggerList
	fs.Var(&trigs, "trigger", `PSI trigger "some|full <stall_us> <window_us>" (repeatable; default "some 100000 2000000" and "full 100000 2000000")`)
	noTriggers := fs.Bool("no-triggers", false, "do not arm PSI triggers (use vmpressure or polling)")
	noVMPressure := fs.Bool("no-vmpressure", false, "do not use cgroup v1 vmpressure")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if *interval < pressure.MinPollInterval {
		return fmt.Errorf("%w: --interval %s is below %s (reading a pressure file more often stops its triggers)", errUsage, *interval, pressure.MinPollInterval)
	}
	if *duration < 0 {
		return fmt.Errorf("%w: --duration %s is negative", errUsage, *duration)
	}
	for _, t := range trigs {
		if err := t.Validate(true); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	cfg := pressure.OpenConfig{Triggers: trigs, PollInterval: *interval, DisableTriggers: *noTriggers, DisableVMPressure: *noVMPressure}
	name := "this process"
	if *cgPath != "" {
		tree, err := cgroup.DefaultTree()
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", *cgPath, err)
		}
		g, err := tree.Open(*cgPath)
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", *cgPath, err)
		}
		cfg.Group, name = g, "cgroup "+*cgPath
	}
	opened, err := pressure.Open(ctx, cfg)
	if err != nil {
		return err
	}
	psiPath := ""
	if cfg.Group != nil {
		psiPath, _ = cfg.Group.PressurePath("memory")
	} else {
		psiPath, _ = pressure.SelfPressurePath("memory")
	}

	out := &syncWriter{w: stdout}
	out.printf("watching memory pressure of %s: %s\n", name, opened.Source.Describe())
	for _, r := range opened.Rejected {
		out.printf("  not used: %s\n", r)
	}
	model, err := pressure.NewModel(pressure.ModelConfig{})
	if err != nil {
		return err
	}
	gate, err := pressure.NewGate(pressure.Policy{})
	if err != nil {
		return err
	}
	rec := pressure.NewRecorder(time.Now())
	m := &pressure.Monitor{Source: opened.Source, Model: model, Gate: gate, Recorder: rec,
		OnEvent: func(ev pressure.Event, l pressure.Level) {
			if ev.Polled {
				return // samples show up in the status lines
			}
			out.printf("%s event %s level=%s\n", ev.Time.Format("15:04:05.000"), strings.TrimPrefix(ev.String(), ev.Time.Format("15:04:05.000")+" "), l)
		},
		OnLevel: func(from, to pressure.Level, at time.Time) {
			st := gate.Stats()
			out.printf("%s level %s -> %s (permits %d/%d)\n", at.Format("15:04:05.000"), from, to, st.Limit, gate.Policy().MaxPermits)
		},
		OnShedError: func(err error) { out.printf("shed: %v\n", err) },
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()

	tick := time.NewTicker(*interval)
	defer tick.Stop()
	// Agreement: each interval is also classified from the growth of the pressure
	// file's totals (pressure.LevelOfShares, the model's own thresholds) and compared
	// with the level the model reports at its end.
	var agree agreement
	if p, err := pressure.ReadPSI(psiPath); err == nil {
		agree.start(p, time.Now())
	}
	var runErr error
	finished := false
loop:
	for {
		select {
		case runErr = <-done:
			finished = true
			break loop
		case now := <-tick.C:
			line := fmt.Sprintf("%s status level=%s", now.Format("15:04:05.000"), gate.Stats().Level)
			// Averages come from the kernel; reading once per interval (>= 100ms) does not
			// disturb the triggers.
			if p, err := pressure.ReadPSI(psiPath); err == nil {
				line += fmt.Sprintf(" some avg10=%.2f%% full avg10=%.2f%%", p.Some.Avg10, p.Full.Avg10)
				if totals, ok := agree.observe(p, now, gate.Stats().Level, model.Config()); ok {
					line += fmt.Sprintf(" interval: some %.1f%% full %.1f%% (%s)", 100*totals.some, 100*totals.full, totals.level)
				}
			}
			st := gate.Stats()
			out.printf("%s permits=%d/%d\n", line, st.Limit, gate.Policy().MaxPermits)
		}
	}
	cancel()
	if !finished {
		runErr = <-done
	}
	for range opened.Source.Events() {
		// Wait for the sources to end.
	}
	var report strings.Builder
	rec.Snapshot(time.Now()).WriteReport(&report)
	agree.writeReport(&report)
	out.printf("%s", report.String())
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	sayStopped(ctx, "pressure watch") // a signal is how a watch ends: exit 0
	return nil
}

// agreement compares the model's level with what the pressure file's totals say of
// each status interval.
type agreement struct {
	prev, first       pressure.PSI
	prevAt, firstAt   time.Time // zero before the first observation
	intervals, agreed int
}

// intervalTotals is what the totals say of one interval.
type intervalTotals struct {
	some, full float64
	level      pressure.Level
}

func (a *agreement) start(p pressure.PSI, at time.Time) {
	a.prev, a.prevAt, a.first, a.firstAt = p, at, p, at
}

// observe classifies the interval since the last observation and counts whether the
// model's level at its end agrees; ok is false for the first observation.
func (a *agreement) observe(p pressure.PSI, at time.Time, level pressure.Level, cfg pressure.ModelConfig) (intervalTotals, bool) {
	if a.firstAt.IsZero() {
		a.start(p, at)
		return intervalTotals{}, false
	}
	dt := at.Sub(a.prevAt)
	if dt <= 0 {
		return intervalTotals{}, false
	}
	t := intervalTotals{some: float64(p.Some.Total-a.prev.Some.Total) / float64(dt), full: float64(p.Full.Total-a.prev.Full.Total) / float64(dt)}
	t.level = pressure.LevelOfShares(t.some, t.full, cfg)
	a.prev, a.prevAt = p, at
	a.intervals++
	if t.level == level {
		a.agreed++
	}
	return t, true
}

// writeReport adds the agreement and the run's stall shares from the totals.
func (a *agreement) writeReport(b *strings.Builder) {
	if a.intervals == 0 {
		return
	}
	wall := a.prevAt.Sub(a.firstAt)
	fmt.Fprintf(b, "memory.pressure totals over %.1fs: some %.1f%%, full %.1f%% of the time stalled\n", wall.Seconds(),
		100*float64(a.prev.Some.Total-a.first.Some.Total)/float64(wall), 100*float64(a.prev.Full.Total-a.first.Full.Total)/float64(wall))
	fmt.Fprintf(b, "level agrees with the totals in %d of %d intervals (%.0f%%): each interval classified by its stall shares against the model's thresholds\n",
		a.agreed, a.intervals, 100*float64(a.agreed)/float64(a.intervals))
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/cgroup"
	"github.com/psiflow/psiflow/internal/kerneltest"
	"github.com/psiflow/psiflow/pressure"
)

func TestPressureWatch(t *testing.T) {
	if _, err := os.Stat("/proc/pressure/memory"); err != nil {
		kerneltest.Skip(t, kerneltest.PSI, "no PSI on this host: %v", err)
	}
	name := fmt.Sprintf("watchtest-%d", os.Getpid())
	g, err := cgroup.New(name)
	if err != nil {
		kerneltest.Skip(t, kerneltest.Cgroups, "the kernel refuses to create cgroup %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Errorf("remove cgroup %s: %v", name, err)
		}
	})
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"own cgroup", []string{"--duration", "700ms", "--interval", "200ms"}, 0,
			// Not level=normal: other tests on this machine may make real
			// pressure while this runs; the stream's shape is what is checked.
			[]string{"watching memory pressure of this process", "status level=", "/64", "Pressure level distribution",
				"memory.pressure totals over", "level agrees with the totals in"}},
		{"named cgroup, polling", []string{"--cgroup", g.Name(), "--no-triggers", "--no-vmpressure", "--duration", "500ms", "--interval", "100ms"}, 0,
			[]string{"cgroup " + g.Name(), "psi poller every 100ms", "not used: psi-trigger: disabled", "not used: vmpressure: disabled"}},
		{"custom trigger", []string{"--trigger", "full 200000 4000000", "--duration", "300ms"}, 0,
			[]string{`"full 200000 4000000"`}},
		{"interval too short", []string{"--interval", "10ms"}, 2, []string{"stops its triggers"}},
		{"bad trigger", []string{"--trigger", "some 5000000 2000000"}, 2, []string{"exceeds the window"}},
		{"unparsable trigger", []string{"--trigger", "sometimes"}, 2, []string{"some|full"}},
		{"missing cgroup", []string{"--cgroup", "no/such/group-" + name, "--duration", "100ms"}, 1, []string{"no/such/group"}},
		{"stray argument", []string{"now"}, 2, []string{`unexpected argument "now"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := dispatch(context.Background(), &out, &errOut, append([]string{"pressure", "watch"}, tt.args...))
			all := out.String() + errOut.String()
			if code != tt.code {
				t.Fatalf("exit %d, want %d\n%s", code, tt.code, all)
			}
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q:\n%s", w, all)
				}
			}
		})
	}
}

// TestWatchAgreement: each interval is classified from the growth of the totals and
// compared with the model's level at its end.
func TestWatchAgreement(t *testing.T) {
	t0 := time.Unix(100, 0)
	psiAt := func(some, full time.Duration) pressure.PSI {
		var p pressure.PSI
		p.Some.Total, p.Full.Total = some, full
		return p
	}
	var a agreement
	if _, ok := a.observe(psiAt(0, 0), t0, pressure.LevelNormal, pressure.ModelConfig{}); ok {
		t.Fatal("the first observation has no interval")
	}
	steps := []struct {
		some, full time.Duration // totals at the end of a 1 s interval
		level      pressure.Level
		want       pressure.Level
	}{
		{0, 0, pressure.LevelNormal, pressure.LevelNormal},                                      // agrees
		{30 * time.Millisecond, 30 * time.Millisecond, pressure.LevelSome, pressure.LevelFull},  // 3% full: the model said some
		{60 * time.Millisecond, 60 * time.Millisecond, pressure.LevelFull, pressure.LevelFull},  // agrees
		{700 * time.Millisecond, 60 * time.Millisecond, pressure.LevelSome, pressure.LevelSome}, // 64% some, no full: agrees
	}
	for i, st := range steps {
		got, ok := a.observe(psiAt(st.some, st.full), t0.Add(time.Duration(i+1)*time.Second), st.level, pressure.ModelConfig{})
		if !ok || got.level != st.want {
			t.Fatalf("interval %d: %+v (ok %v), want level %s", i, got, ok, st.want)
		}
	}
	var b strings.Builder
	a.writeReport(&b)
	for _, want := range []string{"some 17.5%, full 1.5% of the time stalled", "in 3 of 4 intervals (75%)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

//go:build linux

package harness

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// exitOf runs a shell snippet and returns its wait error.
func exitOf(t *testing.T, script string) error {
	t.Helper()
	err := exec.Command("/bin/sh", "-c", script).Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return err
}

func TestCoTenantFate(t *testing.T) {
	sigkill := exitOf(t, "kill -9 $$")
	sigterm := exitOf(t, "kill -15 $$")
	status3 := exitOf(t, "exit 3")
	tests := []struct {
		name                            string
		err                             error
		deadBeforeStop, asked, sentKill bool
		oom                             uint64
		want                            CoTenantFate
	}{
		{"OOM killer during the run", sigkill, true, false, false, 1, CoOOMKilled},
		{"OOM killer, reaped after a timeout kill", sigkill, true, false, true, 1, CoOOMKilled},
		{"OOM kill while being stopped", sigkill, false, true, false, 2, CoOOMKilled},
		{"harness kill at timeout", sigkill, false, false, true, 0, CoHarnessKilled},
		{"harness kill at timeout, the loader OOM-killed earlier", sigkill, false, false, true, 1, CoHarnessKilled},
		{"SIGKILL from elsewhere", sigkill, true, false, false, 0, CoFailed},
		{"stopped when asked", nil, false, true, false, 0, CoSurvived},
		{"stopped when asked, the loader OOM-killed", nil, false, true, false, 1, CoSurvived},
		{"exited early", nil, true, false, false, 0, CoFailed},
		{"error status", status3, true, false, false, 0, CoFailed},
		{"SIGTERM", sigterm, false, true, false, 0, CoFailed},
	}
	for _, tt := range tests {
		got, detail := coTenantFate(tt.err, tt.deadBeforeStop, tt.asked, tt.sentKill, tt.oom)
		if got != tt.want {
			t.Errorf("%s: fate %s (%s), want %s", tt.name, got, detail, tt.want)
		}
	}
}

func TestIsZombie(t *testing.T) {
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !isZombie(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("an exited, unreaped child is never a zombie")
		}
		time.Sleep(time.Millisecond)
	}
	_ = cmd.Wait()
	if isZombie(cmd.Process.Pid) {
		t.Error("a reaped child is still a zombie")
	}
}

// coOptions are test options with a memory limit and a co-tenant.
func coOptions(t *testing.T, limit, bytes int64, ramp time.Duration) Options {
	o := testOptions(t)
	o.MemoryLimit = limit
	o.Timeline = true
	o.CoTenant = fakeCoTenant(bytes, ramp)
	o.CoTenant.Share = float64(bytes) / float64(limit)
	return o
}

func TestRunCoTenantRampAndHold(t *testing.T) {
	const limit, bytes, ramp = 512 << 20, 96 << 20, time.Second
	o := coOptions(t, limit, bytes, ramp)
	res, err := Run(context.Background(), fake("loader", "run:3:8"), o)
	skipNoMemoryController(t, err)
	assertRemoved(t, res.Group)
	c := res.CoTenant
	if res.Outcome != Finished || c == nil || c.Fate != CoSurvived {
		t.Fatalf("outcome %s (%s), co-tenant %+v; want finished and survived", res.Outcome, res.Detail, c)
	}
	if c.Touched != bytes || c.Held < ramp || c.Held > res.Wall {
		t.Errorf("co-tenant touched %d, held at %v (wall %v); want %d, after the %v ramp", c.Touched, c.Held, res.Wall, bytes, ramp)
	}
	if res.OOMKills != 0 || res.CoTenantOOMKills != 0 || res.Leftover != 0 {
		t.Errorf("OOM kills %d (co-tenant %d), leftover %d; want none", res.OOMKills, res.CoTenantOOMKills, res.Leftover)
	}
	// Charged to the group: once held, the group holds the co-tenant's bytes (and the
	// loader's 8 MiB); in the first tenth of the ramp it held far less.
	var early, late int64
	late = 1 << 62
	for _, p := range res.Memory {
		switch {
		case p.T < ramp.Seconds()/10:
			early = max(early, p.Bytes)
		case p.T > c.Held.Seconds()+0.1 && p.T < res.Wall.Seconds()-0.5:
			late = min(late, p.Bytes)
		}
	}
	if late < bytes || late == 1<<62 {
		t.Errorf("memory.current after the co-tenant held: at least %d, want ≥ %d", late, bytes)
	}
	// Paced: in the first tenth of the ramp at least half of the co-tenant's bytes
	// were still to come. Measured against the held level, not against zero: the two
	// processes' own memory (several times larger under -race) is there from the start.
	if early > late-bytes/2 {
		t.Errorf("memory.current in the first tenth of the ramp reached %d, within %d of the %d held after it; want more than half of the co-tenant's %d still to come (paced)", early, late-early, late, bytes)
	}
	if res.Steady.N < MinSteadySamples || res.Steady.From < c.Held.Seconds() || res.Steady.CV > 0.05 {
		t.Errorf("steady state %+v: want ≥ %d samples from the hold on, CV under 5%%", res.Steady, MinSteadySamples)
	}
	if res.PSI == nil && res.PSIError == "" {
		t.Error("neither PSI totals nor why not")
	}
	if res.PSI != nil && (res.PSI.SomePct < 0 || res.PSI.SomePct > 100 || res.PSI.FullPct > res.PSI.SomePct) {
		t.Errorf("PSI %+v out of range", res.PSI)
	}
}

// TestRunCoTenantOOMKilled makes the co-tenant exceed the limit by itself: the OOM
// killer must choose it (its oom_score_adj is 1000), and the kill must count as the
// co-tenant's, not the loader's.
func TestRunCoTenantOOMKilled(t *testing.T) {
	o := coOptions(t, 96<<20, 256<<20, 500*time.Millisecond)
	// The OOM killer weighs page tables too: early in the ramp a race-enabled loader can
	// outweigh the co-tenant. Make the co-tenant the first choice (raising
	// oom_score_adj needs no privilege, lowering does), so that the test is about telling
	// kills apart.
	o.CoTenant.Env = append(o.CoTenant.Env, envOOMAdj+"=1000")
	res, err := Run(context.Background(), fake("loader", "run:3:4"), o)
	skipNoMemoryController(t, err)
	assertRemoved(t, res.Group)
	c := res.CoTenant
	if c == nil || c.Fate != CoOOMKilled || res.CoTenantOOMKills != 1 {
		t.Fatalf("co-tenant %+v, co-tenant OOM kills %d; want oom-killed", c, res.CoTenantOOMKills)
	}
	if res.Outcome != Finished || res.LoaderOOMKills != 0 {
		t.Errorf("loader %s (%s) with %d OOM kills; want finished with none", res.Outcome, res.Detail, res.LoaderOOMKills)
	}
	if c.Died <= 0 || c.Died > res.Wall || c.Held != 0 {
		t.Errorf("co-tenant died at %v (wall %v), held at %v: want a death during the run, never held", c.Died, res.Wall, c.Held)
	}
}

// TestRunCoTenantLoaderOOM: the loader blows the limit next to a small co-tenant; the
// kill is the loader's and the co-tenant survives.
func TestRunCoTenantLoaderOOM(t *testing.T) {
	o := coOptions(t, 128<<20, 16<<20, 0)
	res, err := Run(context.Background(), fake("hog", "alloc:1024"), o)
	skipNoMemoryController(t, err)
	assertRemoved(t, res.Group)
	if res.Outcome != OOMKilled || res.LoaderOOMKills < 1 || res.CoTenantOOMKills != 0 {
		t.Fatalf("loader %s (%s), loader OOM kills %d, co-tenant's %d; want the loader OOM-killed", res.Outcome, res.Detail, res.LoaderOOMKills, res.CoTenantOOMKills)
	}
	if c := res.CoTenant; c == nil || c.Fate != CoSurvived {
		t.Errorf("co-tenant %+v, want survived", c)
	}
}

// TestRunCoTenantTimeout: the harness's own SIGKILL at the timeout is neither an OOM
// kill of the co-tenant nor of the loader.
func TestRunCoTenantTimeout(t *testing.T) {
	o := coOptions(t, 256<<20, 32<<20, 100*time.Millisecond)
	o.Timeout = 2 * time.Second
	res, err := Run(context.Background(), fake("hang", "hang"), o)
	skipNoMemoryController(t, err)
	assertRemoved(t, res.Group)
	if res.Outcome != TimedOut || !strings.Contains(res.Detail, "did not finish") {
		t.Fatalf("outcome %s (%s), want timeout", res.Outcome, res.Detail)
	}
	c := res.CoTenant
	if c == nil || c.Fate != CoHarnessKilled || res.CoTenantOOMKills != 0 || res.LoaderOOMKills != 0 || res.OOMKills != 0 {
		t.Errorf("co-tenant %+v; OOM kills %d (loader %d, co-tenant %d): want killed by the harness, no OOM kills",
			c, res.OOMKills, res.LoaderOOMKills, res.CoTenantOOMKills)
	}
	if c != nil && c.Held == 0 {
		t.Errorf("co-tenant never held its 32 MiB in 2 s")
	}
}

// TestCompareWithCoTenant runs a tiny loader next to a co-tenant at 70% of a small
// limit (256 MiB: the race-enabled test binaries take about 30 MiB each): the loader must finish and the co-tenant must not be OOM-killed (asserted on
// kills and completion, not on time); every share runs in every round, the order of
// the loaders alternating.
func TestCompareWithCoTenant(t *testing.T) {
	o := testOptions(t)
	o.Warmup = 2
	var seen []string
	rep, err := Compare(context.Background(), Plan{
		Loaders:  []Loader{fake("A", "run:2:8"), fake("B", "run:2:4")},
		Limits:   []int64{256 << 20},
		Shares:   []float64{0, 0.7},
		Rounds:   2,
		Options:  o,
		CoTenant: CoTenant{Argv: fakeCoTenant(0, 0).Argv, Env: fakeCoTenant(0, 0).Env, Ramp: 500 * time.Millisecond},
	}, func(r Result) { seen = append(seen, r.Loader+"@"+fmtShare(r.Share)) })
	skipNoMemoryController(t, err)
	if got, want := strings.Join(seen, " "), "A@alone B@alone B@70% A@70% A@alone B@alone B@70% A@70%"; got != want {
		t.Errorf("run order %q, want %q", got, want)
	}
	for _, r := range rep.Runs {
		assertRemoved(t, r.Group)
		if r.Outcome != Finished {
			t.Errorf("%s at %v round %d: %s (%s), want finished", r.Loader, r.Share, r.Round, r.Outcome, r.Detail)
		}
		t.Logf("%s share %v round %d: peak %d MiB", r.Loader, r.Share, r.Round, r.PeakBytes>>20)
		if r.Share == 0 && r.CoTenant != nil {
			t.Errorf("alone run has a co-tenant: %+v", r.CoTenant)
		}
		if r.Share == 0.7 {
			if r.CoTenant == nil || r.CoTenant.Fate != CoSurvived || r.CoTenantOOMKills != 0 || r.OOMKills != 0 {
				t.Errorf("%s round %d: co-tenant %+v, OOM kills %d; want it to survive with none", r.Loader, r.Round, r.CoTenant, r.OOMKills)
			} else if r.CoTenant.Bytes != int64(r.Share*float64(256<<20)) || r.CoTenant.Touched != (r.CoTenant.Bytes+pageSize-1)/pageSize*pageSize {
				t.Errorf("%s round %d: co-tenant touched %d of %d bytes", r.Loader, r.Round, r.CoTenant.Touched, r.CoTenant.Bytes)
			}
		}
	}
	for _, s := range rep.Summaries {
		if s.Share == 0.7 && (s.Slowdown.N != 2 || s.Slowdown.Median <= 0 || s.CoTenantOOMKilled != 0) {
			t.Errorf("%s at 70%%: slowdown %+v, co-tenant kills %d", s.Loader, s.Slowdown, s.CoTenantOOMKilled)
		}
	}
}

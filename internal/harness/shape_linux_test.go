//go:build linux

package harness

import (
	"context"
	"testing"
	"time"
)

// A spiking co-tenant's memory is charged to the group while it holds its peak and
// leaves the group when it falls.
func TestRunCoTenantSpikeFalls(t *testing.T) {
	const limit, peak, after = 512 << 20, 96 << 20, 16 << 20
	const hold = 700 * time.Millisecond
	o := coOptions(t, limit, peak, 200*time.Millisecond)
	o.CoTenant.Hold, o.CoTenant.After = hold, after
	res, err := Run(context.Background(), fake("loader", "run:4:8"), o)
	skipNoMemoryController(t, err)
	assertRemoved(t, res.Group)
	c := res.CoTenant
	if res.Outcome != Finished || c == nil || c.Fate != CoSurvived {
		t.Fatalf("outcome %s (%s), co-tenant %+v; want finished and survived", res.Outcome, res.Detail, c)
	}
	if c.Held == 0 || c.Fell < c.Held+hold || c.Fell > res.Wall || c.Hold != hold || c.After != after {
		t.Fatalf("co-tenant held at %v, fell at %v (wall %v), hold %v, after %d: want a fall after the hold, during the run", c.Held, c.Fell, res.Wall, c.Hold, c.After)
	}
	// Charged while held, uncharged after the fall: the least memory.current while
	// holding is above the most after the fall by most of the difference.
	heldMin, fellMax := int64(1<<62), int64(0)
	for _, p := range res.Memory {
		switch {
		case p.T > c.Held.Seconds()+0.05 && p.T < c.Fell.Seconds()-0.05:
			heldMin = min(heldMin, p.Bytes)
		case p.T > c.Fell.Seconds()+0.2 && p.T < res.Wall.Seconds()-0.3:
			fellMax = max(fellMax, p.Bytes)
		}
	}
	if heldMin == 1<<62 || fellMax == 0 {
		t.Fatalf("no samples while holding (%d) or after the fall (%d)", heldMin, fellMax)
	}
	if heldMin-fellMax < (peak-after)/2 {
		t.Errorf("memory.current at least %d MiB while holding, at most %d MiB after the fall: want a drop of most of the %d MiB given back",
			heldMin>>20, fellMax>>20, (peak-after)>>20)
	}
}

func TestRunTrainer(t *testing.T) {
	tests := []struct {
		name      string
		limit     int64
		ballast   int64
		loaderMiB int
		outcome   Outcome
		trainer   bool // the trainer's own process was OOM-killed
		loader    bool // the loader's (a child's) was
	}{
		{name: "finishes", limit: 256 << 20, ballast: 32 << 20, outcome: Finished},
		{name: "the trainer's ballast blows the limit", limit: 128 << 20, ballast: 512 << 20, outcome: OOMKilled, trainer: true},
		{name: "the loader blows the limit", limit: 128 << 20, ballast: 16 << 20, loaderMiB: 1024, outcome: OOMKilled, loader: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			o.MemoryLimit, o.Ballast = tt.limit, tt.ballast
			res, err := Run(context.Background(), fakeTrainer("trainer", tt.loaderMiB), o)
			skipNoMemoryController(t, err)
			assertRemoved(t, res.Group)
			if res.Outcome != tt.outcome || res.TrainerOOMKilled != tt.trainer {
				t.Fatalf("outcome %s (%s), trainer OOM-killed %v; want %s, %v", res.Outcome, res.Detail, res.TrainerOOMKilled, tt.outcome, tt.trainer)
			}
			if tt.trainer && (res.CoTenantOOMKills != 1 || res.LoaderOOMKills != 0) {
				t.Errorf("co-tenant (trainer) kills %d, loader kills %d; want 1, 0", res.CoTenantOOMKills, res.LoaderOOMKills)
			}
			if tt.loader && (res.CoTenantOOMKills != 0 || res.LoaderOOMKills < 1) {
				t.Errorf("co-tenant (trainer) kills %d, loader kills %d; want 0 and at least 1", res.CoTenantOOMKills, res.LoaderOOMKills)
			}
			if res.Ballast != tt.ballast || res.Share != float64(tt.ballast)/float64(tt.limit) {
				t.Errorf("ballast %d, share %v; want %d, %v", res.Ballast, res.Share, tt.ballast, float64(tt.ballast)/float64(tt.limit))
			}
			if tt.outcome == Finished {
				if ok, known := res.Keys.ExactlyOnce(); !ok || !known || res.Keys.Delivered != 16 || res.Keys.By != "position" {
					t.Errorf("keys %+v: want 16 delivered exactly once, by position", res.Keys)
				}
			}
		})
	}
}

func TestRunKeysAndPauses(t *testing.T) {
	o := testOptions(t)
	res, err := Run(context.Background(), fake("once", "keys:a,b|c"), o)
	if err != nil {
		t.Fatal(err)
	}
	if ok, known := res.Keys.ExactlyOnce(); !ok || !known || res.Keys.Delivered != 3 {
		t.Errorf("keys a,b|c: %+v, want 3 delivered exactly once", res.Keys)
	}
	res, err = Run(context.Background(), fake("twice", "keys:a,b|a"), o)
	if err != nil {
		t.Fatal(err)
	}
	if ok, known := res.Keys.ExactlyOnce(); ok || !known || res.Keys.Missing != 1 {
		t.Errorf("keys a,b|a: %+v, want not exactly once (b missing from the second delivery of a)", res.Keys)
	}
	res, err = Run(context.Background(), fake("pause", "pause:2.5"), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Finished || res.Pauses != 1 || (res.Paused-2500*time.Millisecond).Abs() > time.Millisecond {
		t.Errorf("pause: %s, %d pauses, %v paused; want finished, 1 pause of 2.5 s (by the loader's clock)", res.Outcome, res.Pauses, res.Paused)
	}
	if _, err := Run(context.Background(), fake("no-ballast-arg", "keys:a"), Options{Ballast: 1 << 20}); err == nil {
		t.Error("a ballast for a loader without {ballast} was accepted")
	}
}

// A comparison over a spike and a trainer's ballast: every cell runs in every round,
// and the summaries count the spike runs against the alone runs.
func TestCompareShapes(t *testing.T) {
	o := testOptions(t)
	rep, err := Compare(context.Background(), Plan{
		Loaders:  []Loader{fakeTrainer("T", 0)},
		Limits:   []int64{256 << 20},
		Shapes:   []Shape{{Kind: Alone}, {Kind: Spike, Share: 0.4, Hold: 300 * time.Millisecond, After: 0.1}, {Kind: Trainer, Share: 0.2}},
		Rounds:   2,
		Options:  o,
		CoTenant: CoTenant{Argv: fakeCoTenant(0, 0).Argv, Env: fakeCoTenant(0, 0).Env, Ramp: 100 * time.Millisecond},
	}, nil)
	skipNoMemoryController(t, err)
	if len(rep.Runs) != 6 || len(rep.Summaries) != 3 {
		t.Fatalf("%d runs, %d summaries; want 6 and 3", len(rep.Runs), len(rep.Summaries))
	}
	for _, r := range rep.Runs {
		assertRemoved(t, r.Group)
		if r.Outcome != Finished {
			t.Errorf("%s round %d: %s (%s)", r.Shape, r.Round, r.Outcome, r.Detail)
		}
		switch r.Shape {
		case "spike:0.4/300ms/0.1":
			if r.CoTenant == nil || r.CoTenant.Hold != 300*time.Millisecond || r.Ballast != 0 {
				t.Errorf("spike run: co-tenant %+v, ballast %d", r.CoTenant, r.Ballast)
			}
		case "trainer:0.2":
			if r.CoTenant != nil || r.Ballast != int64(0.2*float64(rep.Runs[0].Limit)) {
				t.Errorf("trainer run: co-tenant %+v, ballast %d", r.CoTenant, r.Ballast)
			}
		case "alone":
			if r.CoTenant != nil || r.Ballast != 0 {
				t.Errorf("alone run: co-tenant %+v, ballast %d", r.CoTenant, r.Ballast)
			}
		default:
			t.Errorf("run in cell %q", r.Shape)
		}
	}
	for _, s := range rep.Summaries {
		if s.KeysChecked != 2 || s.ExactlyOnce != 2 {
			t.Errorf("%s: keys checked %d, exactly once %d; want 2, 2", s.Shape, s.KeysChecked, s.ExactlyOnce)
		}
		if s.Shape == "spike:0.4/300ms/0.1" && s.SpikeRuns != 2 {
			t.Errorf("spike: %d runs against alone, want 2", s.SpikeRuns)
		}
	}
	// A trainer cell needs trainers.
	_, err = Compare(context.Background(), Plan{Loaders: []Loader{fake("A", "run:1:1")}, Limits: []int64{256 << 20},
		Shapes: []Shape{{Kind: Trainer, Share: 0.5}}, Options: o}, nil)
	if err == nil {
		t.Error("a trainer cell for a loader without {ballast} was accepted")
	}
}

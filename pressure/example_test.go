package pressure_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/pressure"
)

func ExampleParse() {
	p, err := pressure.Parse([]byte("some avg10=2.76 avg60=2.24 avg300=1.19 total=5385575\nfull avg10=0.34 avg60=1.45 avg300=0.57 total=2358096\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Some.Avg10, p.Full.Total, p.HasFull)
	// Output: 2.76 2.358096s true
}

func ExampleTrigger_Validate() {
	t := pressure.Trigger{Stall: 50 * time.Millisecond, Window: 500 * time.Millisecond}
	fmt.Println(t)
	fmt.Println(t.Validate(true))
	fmt.Println(t.Validate(false))
	// Output:
	// some 50000 500000
	// <nil>
	// trigger "some 50000 500000": window 500ms is not a multiple of 2s, which the kernel requires of openers without CAP_SYS_RESOURCE (open it from a user namespace, see ProbeShortWindows, or use 2s, 4s, 6s, 8s or 10s): window needs CAP_SYS_RESOURCE
}

func ExampleThresholdsFor() {
	some, full, err := pressure.ThresholdsFor(pressure.ThresholdsConfig{
		TargetIOPS: 50000,                  // one I/O every 20 µs
		Safety:     5,                      // tolerate 5 I/O intervals of stall: 100 µs
		ReclaimP99: 150 * time.Millisecond, // full: 3 × 150 ms
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(some)
	fmt.Println(full)
	// Output:
	// some 100 2000000
	// full 450000 2000000
}

// The model and the gate are pure state machines: feed them events and times.
func ExampleGate() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	model, _ := pressure.NewModel(pressure.ModelConfig{Hold: 4 * time.Second, MinDwell: time.Second})
	gate, _ := pressure.NewGate(pressure.Policy{MaxPermits: 8, Quiet: 2 * time.Second, Step: 4, StepEvery: time.Second})
	apply := func(l pressure.Level, at time.Duration) {
		gate.Apply(l, start.Add(at))
		gate.Advance(start.Add(at))
		fmt.Printf("%4s %-6s permits %d\n", at, l, gate.Limit())
	}
	l, _ := model.Observe(pressure.Event{Time: start, Signal: pressure.SignalSome, Share: 0.05, Window: 2 * time.Second, Count: 1})
	apply(l, 0)
	l, _ = model.Observe(pressure.Event{Time: start.Add(time.Second), Signal: pressure.SignalFull, Share: 0.05, Window: 2 * time.Second, Count: 1})
	apply(l, time.Second)
	l, _ = model.Advance(start.Add(5 * time.Second))
	apply(l, 5*time.Second)
	apply(l, 7*time.Second)
	apply(l, 8*time.Second)

	// Two-phase admission: take a permit first, then buffers, then submit.
	if err := gate.Acquire(context.Background()); err == nil {
		// ... take buffers, submit the read ...
		gate.Release()
	}
	// Output:
	//   0s some   permits 4
	//   1s full   permits 0
	//   5s normal permits 0
	//   7s normal permits 4
	//   8s normal permits 8
}

func ExampleDistribution_WriteReport() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := pressure.NewRecorder(start)
	rec.Level(pressure.LevelSome, start.Add(90*time.Second))
	rec.Level(pressure.LevelNormal, start.Add(92*time.Second))
	rec.Event(pressure.Event{Signal: pressure.SignalSome, Count: 1})
	rec.Snapshot(start.Add(100 * time.Second)).WriteReport(os.Stdout)
	// Output:
	// Pressure level distribution over 1m40s (now normal):
	//   normal   ██████████   98.0% of time  (2 entries, mean 49s)
	//   some     ░░░░░░░░░░    2.0% of time  (1 entries, mean 2s)
	//   full     ░░░░░░░░░░    0.0% of time  (0 entries, mean 0s)
	//   critical ░░░░░░░░░░    0.0% of time  (0 entries, mean 0s)
	// Events: some=1
}

// Open picks PSI triggers, else vmpressure, else polling, and says why.
func ExampleOpen() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opened, err := pressure.Open(ctx, pressure.OpenConfig{})
	if err != nil {
		fmt.Println("no pressure signal:", err)
		return
	}
	fmt.Println("watching with", opened.Kind, "-", opened.Source.Describe())
	for _, reason := range opened.Rejected {
		fmt.Println("not used:", reason)
	}
	cancel()
	for range opened.Source.Events() {
	}
}

// A headroom turns memory samples into a byte budget: here a co-tenant takes 210 MiB
// of a 256 MiB cgroup, which leaves the loader less than its floor.
func ExampleHeadroom() {
	h, err := pressure.NewHeadroom(pressure.HeadroomConfig{
		Floor: 40 << 20, BudgetFloor: 16 << 20, Max: 64 << 20, Reserve: 16 << 20,
		Read: func() (pressure.MemorySample, error) {
			return pressure.MemorySample{Limit: 256 << 20, Limited: true, Unreclaimable: 240 << 20, Self: 30 << 20}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	r, err := h.Update()
	if err != nil {
		panic(err)
	}
	fmt.Println("budget:", bytesize.Human(r.Budget))
	fmt.Println(r.Message(40 << 20))
	// Output:
	// budget: 16 MiB
	// the cgroup leaves the loader 30 MiB (limit 256 MiB, others hold 210 MiB), below its floor of 40 MiB: running at its floor
}

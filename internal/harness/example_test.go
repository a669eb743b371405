package harness_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/psiflow/psiflow/internal/harness"
	"github.com/psiflow/psiflow/internal/harness/protocol"
)

// A single run of a loader under a 256 MiB limit, cold.
func ExampleRun() {
	files, err := harness.DataFiles("/data/imagenet-like")
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := harness.Run(context.Background(), harness.Loader{
		Name: "dataloader",
		Argv: []string{"/usr/bin/python3", "benchmarks/peers/dataloader.py", "--data", "/data/imagenet-like"},
	}, harness.Options{MemoryLimit: 256 << 20, Timeout: 5 * time.Minute, Warmup: 3, Cold: true, Data: files})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %.0f samples/s, p99 %v, peak %d MiB, %d OOM kills\n",
		res.Outcome, res.SamplesPerSec, res.P99, res.PeakBytes>>20, res.OOMKills)
}

// Two loaders side by side, unconstrained and at 256 MiB, three rounds each.
func ExampleCompare() {
	rep, err := harness.Compare(context.Background(), harness.Plan{
		Loaders: []harness.Loader{
			{Name: "dataloader", Argv: []string{"/usr/bin/python3", "benchmarks/peers/dataloader.py", "--data", "/data/d"}},
			{Name: "psiflow", Argv: []string{"bin/psiflow-imagefolder", "--data", "/data/d"}},
		},
		Limits:  []int64{0, 256 << 20},
		Rounds:  3,
		Options: harness.Options{Timeout: 5 * time.Minute, Warmup: 3},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = rep.WriteMarkdown(os.Stdout)
}

// A loader next to a co-tenant at 0% (alone), 50% and 70% of a 256 MiB limit: the
// co-tenant ("psiflow cotenant") ramps its memory over 5 s in the loader's cgroup and
// holds it until the loader ends.
func ExampleCompare_coTenant() {
	rep, err := harness.Compare(context.Background(), harness.Plan{
		Loaders:  []harness.Loader{{Name: "psiflow", Argv: []string{"bin/psiflow-imagefolder", "-data", "/data/d"}}},
		Limits:   []int64{256 << 20},
		Shares:   []float64{0, 0.5, 0.7},
		CoTenant: harness.CoTenant{Argv: []string{"bin/psiflow", "cotenant"}, Ramp: 5 * time.Second},
		Rounds:   5,
		Options:  harness.Options{Timeout: 2 * time.Minute, Warmup: 3},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range rep.Summaries {
		fmt.Printf("%s at %v: co-tenant OOM-killed in %d of %d runs, %.2f× alone\n",
			s.Loader, s.Share, s.CoTenantOOMKilled, s.Runs, s.Slowdown.Median)
	}
}

// The steady-state fluctuation of memory samples: stddev over mean.
func ExampleSteadyFluctuation() {
	var pts []harness.Point
	for i := range 20 {
		pts = append(pts, harness.Point{T: float64(i) * 0.05, Bytes: int64(100 + 10*(i%2*2-1))})
	}
	f := harness.SteadyFluctuation(pts, 0, 1)
	fmt.Printf("%d samples, mean %.0f, fluctuation %.0f%%\n", f.N, f.Mean, 100*f.CV)
	// Output: 20 samples, mean 100, fluctuation 10%
}

// The co-tenant process in-process: 1 MiB at once, held until its input ends.
func ExampleRunCoTenant() {
	var out strings.Builder
	err := harness.RunCoTenant(context.Background(), harness.CoTenantConfig{Bytes: 1 << 20}, strings.NewReader(""), &out)
	ev, _, _ := protocol.Parse([]byte(out.String()))
	fmt.Println(ev.Event, ev.Bytes, err)
	// Output: held 1048576 <nil>
}

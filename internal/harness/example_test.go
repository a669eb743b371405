package harness_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/psiflow/psiflow/internal/harness"
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

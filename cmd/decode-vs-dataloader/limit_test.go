//go:build linux

package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/internal/harness"
	"github.com/psiflow/psiflow/source/synth"
)

// TestLimit measures the transform alone on a few JPEGs and states each
// loader's median samples/s as a share of the limit.
func TestLimit(t *testing.T) {
	files, err := synth.JPEGFiles(t.TempDir(), 4, synth.Image{Width: 320, Height: 240, Quality: 85, Noise: 10}, 1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := measureLimit(files, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	if l.perCore <= 0 || l.cpus != runtime.NumCPU() || l.files != 4 {
		t.Fatalf("limit %+v: want a positive per-core rate over 4 files on %d CPUs", l, runtime.NumCPU())
	}
	var b strings.Builder
	l = cpuLimit{perCore: 400, cpus: 2, files: 4}
	writeLimitTable(&b, &harness.Report{Summaries: []harness.Summary{
		{Loader: "psiflow", Finished: 3, SamplesPerSec: harness.Stat{N: 3, Median: 600}},
		{Loader: "dataloader", Limit: 128 << 20, Finished: 0},
	}}, l, map[loaderLimit]float64{{"psiflow", 0}: 360})
	for _, want := range []string{"× 2 CPUs = 800 images/s", "| none | psiflow | 600 | 0.75 | 0.90 |", "| 128 MiB | dataloader | DNF | – | – |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if _, err := measureLimit(nil, 0.05); err == nil {
		t.Error("no files accepted")
	}
}

//go:build linux

package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/psiflow/psiflow/internal/harness"
	"github.com/psiflow/psiflow/stage/decode"
)

// cpuLimit is the CPU-bound limit of the validation transform on this host:
// decode + Resize(256) + CenterCrop(224) alone (what the psiflow loader's
// decode stage runs), per CPU-second on one thread, times the CPUs.
type cpuLimit struct {
	perCore float64 // images per CPU-second
	cpus    int
	files   int
}

func (l cpuLimit) rate() float64 { return l.perCore * float64(l.cpus) }

// measureLimit times the transform alone on up to 200 of files (spread over
// the list, read into memory first) for about seconds of thread CPU time.
func measureLimit(files []string, seconds float64) (cpuLimit, error) {
	n := min(len(files), 200)
	var blobs [][]byte
	for i := range n {
		b, err := os.ReadFile(files[i*len(files)/n])
		if err != nil {
			return cpuLimit{}, err
		}
		blobs = append(blobs, b)
	}
	if len(blobs) == 0 {
		return cpuLimit{}, fmt.Errorf("no files to measure the transform on")
	}
	d, err := decode.NewDecoder(decode.Options{})
	if err != nil {
		return cpuLimit{}, err
	}
	defer d.Close()
	p, err := decode.NewProcessor(d, decode.Transform{Resize: 256, CenterCrop: 224})
	if err != nil {
		return cpuLimit{}, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i, b := range blobs { // warm-up: buffers sized
		if _, err := p.Image(decode.Encoded{Data: b, Key: files[i], Index: int64(i)}); err != nil {
			return cpuLimit{}, err
		}
	}
	cpu := func() time.Duration {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		return time.Duration(ts.Nano())
	}
	c0, images := cpu(), 0
	for (cpu() - c0).Seconds() < seconds {
		for i, b := range blobs {
			if _, err := p.Image(decode.Encoded{Data: b, Key: files[i], Index: int64(i)}); err != nil {
				return cpuLimit{}, err
			}
			images++
		}
	}
	return cpuLimit{perCore: float64(images) / (cpu() - c0).Seconds(), cpus: runtime.NumCPU(), files: len(blobs)}, nil
}

// writeLimitTable states each loader's median samples/s as a share of
// psiflow's CPU-bound limit, and its samples per CPU-second (perCPU, from
// writeCPUTable) as a share of the transform's per-core rate: the same share
// as the machine would give it if nothing else ran (on a shared machine the
// first is held down by the other tenants, the second is not).
func writeLimitTable(w io.Writer, rep *harness.Report, l cpuLimit, perCPU map[loaderLimit]float64) {
	fmt.Fprintf(w, "\nCPU-bound limit: decode + Resize(256) + CenterCrop(224) alone, %.0f images per CPU-second on one thread (%d files, measured before the runs) × %d CPUs = %.0f images/s.\n\n",
		l.perCore, l.files, l.cpus, l.rate())
	fmt.Fprintln(w, "| limit | loader | samples/s | share of the CPU-bound limit | samples per CPU-second ÷ per-core rate |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: |")
	for _, s := range rep.Summaries {
		lim := "none"
		if s.Limit > 0 {
			lim = harness.FormatBytes(s.Limit)
		}
		if s.Finished == 0 {
			fmt.Fprintf(w, "| %s | %s | DNF | – | – |\n", lim, s.Loader)
			continue
		}
		eff := "–"
		if c := perCPU[loaderLimit{s.Loader, s.Limit}]; c > 0 {
			eff = fmt.Sprintf("%.2f", c/l.perCore)
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %.2f | %s |\n", lim, s.Loader, s.SamplesPerSec.Median, s.SamplesPerSec.Median/l.rate(), eff)
	}
}

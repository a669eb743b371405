//go:build linux

package decode

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPU returns the calling thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// cpuMeter reports the benchmark loop's thread CPU time per op ("cpu-ns/op")
// and the rate per CPU-second ("images/cpu-s"): on this shared, overloaded
// machine wall time includes waiting for a core, CPU time does not.
type cpuMeter struct {
	start int64
	ns    float64 // CPU time per op, once reported
}

func startCPU(b *testing.B) *cpuMeter {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	return &cpuMeter{start: threadCPU()}
}

func (m *cpuMeter) report(b *testing.B) {
	ns := float64(threadCPU()-m.start) / float64(b.N)
	m.ns = ns
	b.ReportMetric(ns, "cpu-ns/op")
	if ns > 0 {
		b.ReportMetric(1e9/ns, "images/cpu-s")
	}
}

// reportLimit reports the CPU-bound limit of the benchmarked work on this
// host, "limit-images/s": the rate per CPU-second times the CPUs. Call it
// after report.
func (m *cpuMeter) reportLimit(b *testing.B) {
	if m.ns > 0 {
		b.ReportMetric(1e9/m.ns*float64(runtime.NumCPU()), "limit-images/s")
	}
}

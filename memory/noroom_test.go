package memory

import (
	"testing"
	"time"
)

// TestOthersTrendProjectsOnlyARiseAboveThePeak: the paused loader's watch
// looks the others' growth ahead only where they rise above their recent peak
// (the headroom's before the pause, and the watch's own readings): a trainer's
// step that frees its activations and allocates the next ones is no ramp, a
// steady ramp is projected at its rate, and a reading above the peak adds only
// its rise above it.
func TestOthersTrendProjectsOnlyARiseAboveThePeak(t *testing.T) {
	const every = 20 * time.Millisecond
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		name   string
		window time.Duration
		seed   int64   // the headroom's recent peak at the watch's start; 0: none
		others []int64 // one reading every 20 ms
		want   float64 // bytes/s of the last reading
	}{
		// The trainer grid at 85% of 2 GiB: at the pause 1893 MiB; within
		// 60 ms down to 1810 and back up to 1882 (1.2 GiB/s over the window,
		// which left a loader that had room).
		{"a trainer's step below the peak", 2 * time.Second, 1893 * mib, []int64{1850 * mib, 1810 * mib, 1845 * mib, 1882 * mib}, 0},
		{"a step back to the peak the watch saw", 2 * time.Second, 0, []int64{1893 * mib, 1810 * mib, 1850 * mib, 1893 * mib}, 0},
		// A ramp like the spike grid's (123 MiB/s there), 125 MiB/s: 2.5 MiB a reading.
		{"a steady ramp at its rate", 2 * time.Second, 100 * mib, []int64{100 * mib, 100*mib + 2560<<10, 105 * mib, 105*mib + 2560<<10, 110 * mib, 110*mib + 2560<<10}, 125 * mib},
		{"a ramp above the headroom's peak", 2 * time.Second, 200 * mib, []int64{150 * mib, 200 * mib, 210 * mib}, 500 * mib},
		// 7 MiB above the peak in 20 ms: 350 MiB/s, not the 4.4 GiB/s from the trough.
		{"a step past the peak: its rise above it", 2 * time.Second, 1893 * mib, []int64{1810 * mib, 1900 * mib}, 350 * mib},
		// Above the window's readings: the least of the growth since the
		// trough (72 MiB in 60 ms) and the rise above the previous reading.
		{"the seed left the window", 50 * time.Millisecond, 1893 * mib, []int64{1810 * mib, 1811 * mib, 1812 * mib, 1882 * mib}, (1882 - 1810) * mib / (3 * every).Seconds()},
		{"no window: the previous reading only", -1, 1893 * mib, []int64{1810 * mib, 1850 * mib}, 40 * mib / every.Seconds()},
		{"falling", 2 * time.Second, 0, []int64{1900 * mib, 1890 * mib, 1880 * mib}, 0},
		{"one reading", 2 * time.Second, 0, []int64{1900 * mib}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := newOthersTrend(tt.window)
			if tt.seed != 0 {
				tr.seed(t0, tt.seed)
			}
			var got float64
			for i, o := range tt.others {
				got = tr.add(t0.Add(time.Duration(i+1)*every), o)
			}
			if d := got - tt.want; d > 0.01*mib || d < -0.01*mib {
				t.Errorf("growth %.1f MiB/s, want %.1f", got/mib, tt.want/mib)
			}
		})
	}
}

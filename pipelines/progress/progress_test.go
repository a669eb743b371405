package progress

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/flow"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBottleneck(t *testing.T) {
	tests := []struct {
		name    string
		stats   []flow.StageStats
		elapsed time.Duration
		want    string
		pct     float64
	}{
		{"busiest per worker wins", []flow.StageStats{{Name: "read", Workers: 1, Busy: 1}, {Name: "decode", Workers: 2, Busy: 3}}, 2 * time.Second, "decode", 75},
		{"no workers skipped", []flow.StageStats{{Name: "edge", Workers: 0, Busy: 5}}, time.Second, "", 0},
		{"no time", []flow.StageStats{{Name: "read", Workers: 1, Busy: 1}}, 0, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, pct := Bottleneck(tc.stats, tc.elapsed)
			if got != tc.want || pct != tc.pct {
				t.Fatalf("Bottleneck = %q %.1f; want %q %.1f", got, pct, tc.want, tc.pct)
			}
		})
	}
}

func TestReportStopsItsGoroutine(t *testing.T) {
	var calls atomic.Int64
	seen := make(chan struct{}, 1)
	stop := Report(time.Millisecond, func(Snapshot) {
		if calls.Add(1) == 3 {
			seen <- struct{}{}
		}
	}, func() Snapshot { return Snapshot{} })
	<-seen
	stop()
	n := calls.Load()
	if n < 3 {
		t.Fatalf("progress called %d times before stop", n)
	}
	if off := Report(0, func(Snapshot) { t.Fatal("called") }, nil); off == nil {
		t.Fatal("nil stop")
	} else {
		off()
	}
}

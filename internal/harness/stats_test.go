package harness

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/psiflow/psiflow/internal/harness/protocol"
)

func batches(n int, times ...float64) []protocol.Event {
	out := make([]protocol.Event, len(times))
	for i, t := range times {
		out[i] = protocol.Event{Event: protocol.Batch, N: n, T: t}
	}
	return out
}

func TestMeasure(t *testing.T) {
	uneven := batches(1, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 3.0)
	mixed := append([]protocol.Event{{Event: "start", T: 0.5}}, batches(10, 1, 2)...)
	mixed = append(mixed, protocol.Event{Event: protocol.Done, Samples: 20, T: 2.5})
	tests := []struct {
		name    string
		events  []protocol.Event
		warmup  int
		want    Metrics
		epsilon float64
	}{
		{name: "none", events: nil, want: Metrics{}},
		{name: "no warm-up counts from the start", events: batches(10, 1, 2, 3, 4), warmup: 0,
			want: Metrics{Batches: 4, Samples: 40, SamplesPerSec: 10, P50: time.Second, P99: time.Second, MaxGap: time.Second}},
		{name: "warm-up 1", events: batches(10, 2, 3, 5, 6), warmup: 1,
			want: Metrics{Batches: 4, Samples: 40, Warmup: 1, SamplesPerSec: 30.0 / 4, P50: time.Second, P99: 2 * time.Second, MaxGap: 2 * time.Second}},
		{name: "warm-up 2 drops the slow start", events: batches(10, 5, 9, 9.5, 10), warmup: 2,
			want: Metrics{Batches: 4, Samples: 40, Warmup: 2, SamplesPerSec: 20, P50: 500 * time.Millisecond, P99: 500 * time.Millisecond, MaxGap: 500 * time.Millisecond}},
		{name: "warm-up longer than the run keeps the last batch", events: batches(10, 1, 2, 4), warmup: 9,
			want: Metrics{Batches: 3, Samples: 30, Warmup: 2, SamplesPerSec: 5, P50: 2 * time.Second, P99: 2 * time.Second, MaxGap: 2 * time.Second}},
		{name: "one batch", events: batches(64, 2), warmup: 5,
			want: Metrics{Batches: 1, Samples: 64, SamplesPerSec: 32}},
		{name: "p99 is the stall, p50 the steady gap", events: uneven, warmup: 0,
			want: Metrics{Batches: 11, Samples: 11, SamplesPerSec: 11.0 / 3, P50: 100 * time.Millisecond, P99: 2 * time.Second, MaxGap: 2 * time.Second}},
		{name: "other events ignored", events: mixed, warmup: 0,
			want: Metrics{Batches: 2, Samples: 20, SamplesPerSec: 10, P50: time.Second, P99: time.Second, MaxGap: time.Second}},
		{name: "mixed sizes", events: append(batches(64, 1, 2), batches(17, 3)...), warmup: 1,
			want: Metrics{Batches: 3, Samples: 145, Warmup: 1, SamplesPerSec: 81.0 / 2, P50: time.Second, P99: time.Second, MaxGap: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Measure(tt.events, tt.warmup)
			if math.Abs(got.SamplesPerSec-tt.want.SamplesPerSec) > 1e-9 {
				t.Errorf("samples/s = %v, want %v", got.SamplesPerSec, tt.want.SamplesPerSec)
			}
			got.SamplesPerSec = tt.want.SamplesPerSec
			if got != tt.want {
				t.Errorf("Measure = %+v\nwant      %+v", got, tt.want)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	tests := []struct {
		name   string
		values []float64
		p      float64
		want   float64
	}{
		{"p50 of 1..100", hundred, 50, 50},
		{"p99 of 1..100", hundred, 99, 99},
		{"p100 of 1..100", hundred, 100, 100},
		{"p1 of 1..100", hundred, 1, 1},
		{"single", []float64{7}, 99, 7},
		{"p99 of ten is the maximum", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99, 10},
		{"p50 of four is the second", []float64{1, 2, 3, 4}, 50, 2},
		{"tiny p is the minimum", []float64{3, 4}, 0.001, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.values, tt.p); got != tt.want {
				t.Errorf("Percentile(p%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("Percentile of nothing is not NaN")
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name   string
		values []float64
		want   Stat
	}{
		{"empty", nil, Stat{}},
		{"one", []float64{3}, Stat{N: 1, Median: 3, Min: 3, Max: 3}},
		{"odd", []float64{9, 1, 5}, Stat{N: 3, Median: 5, Min: 1, Max: 9}},
		{"even averages the middle", []float64{600, 570, 590, 580}, Stat{N: 4, Median: 585, Min: 570, Max: 600}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]float64(nil), tt.values...)
			if got := Summarize(tt.values); got != tt.want {
				t.Errorf("Summarize(%v) = %+v, want %+v", tt.values, got, tt.want)
			}
			for i := range in {
				if in[i] != tt.values[i] {
					t.Fatal("Summarize reordered its input")
				}
			}
		})
	}
}

func ExampleMeasure() {
	// Four batches of 64; the first is slow (start-up) and is left out as warm-up.
	events := batches(64, 3.0, 3.1, 3.2, 3.5)
	m := Measure(events, 1)
	fmt.Printf("%.0f samples/s, p50 %v, p99 %v\n", m.SamplesPerSec, m.P50, m.P99)
	// Output: 384 samples/s, p50 100ms, p99 300ms
}

func BenchmarkMeasure(b *testing.B) {
	times := make([]float64, 10000)
	for i := range times {
		times[i] = float64(i) * 0.1
	}
	events := batches(64, times...)
	for b.Loop() {
		if m := Measure(events, 3); m.Batches != len(times) {
			b.Fatal(m)
		}
	}
}

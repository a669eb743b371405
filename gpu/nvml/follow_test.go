package nvml

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/psiflow/psiflow/cgroup"
)

type fakeTarget struct {
	mu     sync.Mutex
	quotas []time.Duration
	fail   error
}

func (f *fakeTarget) CPUStat() (cgroup.CPUStat, error) { return cgroup.CPUStat{}, nil }
func (f *fakeTarget) SetCPUMax(q, p time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.quotas = append(f.quotas, q)
	return nil
}

var errExhausted = errors.New("no more samples")

// seq returns its values in turn, then err (errExhausted if nil).
type seq struct {
	vals []float64
	err  error
}

func (s *seq) Utilization() (float64, error) {
	if len(s.vals) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		return 0, errExhausted
	}
	v := s.vals[0]
	s.vals = s.vals[1:]
	return v, nil
}

func TestFollow(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name      string
		vals      []float64
		smoothing float64
		want      []time.Duration // quotas set, per 100 ms period, between 10 and 110 ms
	}{
		{"follows each sample", []float64{0, 1, 0.5, 0.5}, 1, []time.Duration{10 * ms, 110 * ms, 60 * ms}},
		{"smoothed", []float64{0, 1, 1}, 0.5, []time.Duration{10 * ms, 60 * ms, 85 * ms}},
		{"small changes are not made", []float64{0.5, 0.52, 0.47, 0.9}, 1, []time.Duration{60 * ms, 100 * ms}},
		{"out of range clamps", []float64{-3, 7}, 1, []time.Duration{10 * ms, 110 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := &fakeTarget{}
			var changes int
			err := Follow(context.Background(), target, &seq{vals: tc.vals}, FollowConfig{
				Min: 10 * ms, Max: 110 * ms, Period: 100 * ms, Interval: time.Millisecond, Smoothing: tc.smoothing,
				OnChange: func(FollowDecision) { changes++ },
			})
			if !errors.Is(err, errExhausted) {
				t.Fatalf("Follow = %v, want the source's end", err)
			}
			if len(target.quotas) != len(tc.want) {
				t.Fatalf("quotas %v, want %v", target.quotas, tc.want)
			}
			for i := range tc.want {
				if d := target.quotas[i] - tc.want[i]; d > time.Microsecond || d < -time.Microsecond {
					t.Fatalf("quotas %v, want %v", target.quotas, tc.want)
				}
			}
			if changes != len(tc.want)-1 {
				t.Errorf("OnChange called %d times, want %d", changes, len(tc.want)-1)
			}
		})
	}
}

func TestFollowErrors(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ms := time.Millisecond
	gone := errors.New("GPU is lost")
	if err := Follow(ctx, &fakeTarget{}, &seq{vals: []float64{0.5}, err: gone}, FollowConfig{Min: 10 * ms, Max: 20 * ms, Interval: ms}); !errors.Is(err, gone) {
		t.Errorf("a failing source = %v, want its error", err)
	}
	if err := Follow(ctx, &fakeTarget{fail: errors.New("EACCES")}, &seq{vals: []float64{0.5}}, FollowConfig{Min: 10 * ms, Max: 20 * ms}); err == nil || !strings.Contains(err.Error(), "EACCES") {
		t.Errorf("a failing target = %v", err)
	}
	for _, c := range []FollowConfig{{Min: 0, Max: 10 * ms}, {Min: 20 * ms, Max: 10 * ms}, {Min: ms, Max: ms, Smoothing: 2}, {Min: ms, Max: ms, Deadband: 1}} {
		if err := Follow(ctx, &fakeTarget{}, &seq{}, c); err == nil || !strings.Contains(err.Error(), "follow-gpu") {
			t.Errorf("Follow(%+v) = %v, want a configuration error", c, err)
		}
	}
}

func TestFollowStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	src := &seq{vals: []float64{0.5}}
	cancel()
	if err := Follow(ctx, &fakeTarget{}, src, FollowConfig{Min: time.Millisecond, Max: 2 * time.Millisecond, Interval: time.Hour}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow with a cancelled context = %v", err)
	}
}

//go:build linux

package h2d

import (
	"testing"
	"time"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/gpu/cuda"
	"github.com/psiflow/psiflow/gpu/sim"
	"github.com/psiflow/psiflow/internal/fakecuda"
	"github.com/psiflow/psiflow/uma"
)

// device is one kind of device the stages are tested on.
type device struct {
	name string
	open func(t testing.TB) gpu.Device
	// calls counts driver calls by name (nil for the simulated device).
	calls func(names ...string) map[string]int64
}

func devices(t testing.TB) []device {
	path := fakecuda.Build(t, fakecuda.Full)
	f := fakecuda.Open(t, path)
	return []device{
		{name: "sim", open: func(t testing.TB) gpu.Device {
			d, err := sim.Open(sim.Config{Capacity: 256 << 20, Bandwidth: 50e9, Latency: time.Microsecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := d.Close(); err != nil {
					t.Errorf("sim Close: %v", err)
				}
			})
			return d
		}},
		{name: "cuda-fake", open: func(t testing.TB) gpu.Device {
			f.TakeViolations()
			d, err := cuda.Open(cuda.Config{Library: path})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := d.Close(); err != nil {
					t.Errorf("cuda Close: %v", err)
				}
				for _, k := range []string{"alloc", "reg", "stream", "event", "pending"} {
					if n := f.Live(k); n != 0 {
						t.Errorf("the fake driver still has %d live %s", n, k)
					}
				}
				f.CheckNoViolations(t)
			})
			return d
		}, calls: f.Counts},
	}
}

func newUMA(t testing.TB) *uma.UMA {
	t.Helper()
	u, err := uma.New(uma.Config{MemoryLimit: func() (int64, string, error) { return 8 << 30, "test", nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := u.CheckNoLeases(); err != nil {
			t.Errorf("ledger not empty: %v", err)
		}
		if err := u.Close(); err != nil {
			t.Errorf("uma Close: %v", err)
		}
	})
	return u
}

//go:build linux

// Package devicetest is the conformance suite every gpu.Device passes: the
// CUDA binding against the fake driver, and the simulated device. It checks
// the behaviour the copy stages rely on (copies on several streams at once,
// events, copy-back), the host-memory rules (the Go heap and memory outside a
// uma.Registration are refused, registrations do not overlap), allocation
// limits and Close.
package devicetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/uma"
)

// Opener opens a fresh device for one test; the suite closes it. Capacity is
// the device memory the device reports and that nothing else uses (a fake or
// simulated device), or 0 for a real device, whose free memory the suite does
// not predict.
type Opener func(t *testing.T) (d gpu.Device, capacity int64)

// Staging returns n bytes of a UMA arena inside a live uma.Registration,
// released when t ends.
func Staging(t testing.TB, n int64) []byte {
	t.Helper()
	u, err := uma.New(uma.Config{ChunkSize: 64 << 10, MemoryLimit: func() (int64, string, error) { return 8 << 30, "test", nil }})
	if err != nil {
		t.Fatal(err)
	}
	a, err := u.NewArena("staging", n, uma.ArenaOptions{NoHugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Register(context.Background(), 0, n, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Release()
		if err := u.Close(); err != nil {
			t.Errorf("uma Close: %v", err)
		}
	})
	return r.Bytes()
}

// Fill writes a pattern that depends on seed.
func Fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) + seed
	}
}

// Run runs the suite.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		f    func(t *testing.T, d gpu.Device, capacity int64)
	}{
		{"RoundTrip", roundTrip},
		{"Refusals", refusals},
		{"Memory", memory},
		{"Events", events},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, capacity := open(t)
			tc.f(t, d, capacity)
			if err := d.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if _, err := d.Alloc(context.Background(), 1); !errors.Is(err, gpu.ErrClosed) {
				t.Errorf("Alloc after Close = %v, want gpu.ErrClosed", err)
			}
			if err := d.Close(); err != nil {
				t.Errorf("second Close = %v", err)
			}
		})
	}
	t.Run("CloseSaysWhatWasLeft", func(t *testing.T) {
		d, _ := open(t)
		host := Staging(t, 4096)
		if _, err := d.Alloc(context.Background(), 100); err != nil {
			t.Fatal(err)
		}
		if _, err := d.NewStream(); err != nil {
			t.Fatal(err)
		}
		if err := d.Register(host); err != nil {
			t.Fatal(err)
		}
		err := d.Close()
		for _, want := range []string{"1 streams", "1 allocations", "1 host registrations"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Close with things left open = %v, want %q named", err, want)
			}
		}
	})
}

func roundTrip(t *testing.T, d gpu.Device, _ int64) {
	ctx := context.Background()
	const streams, copies, size = 2, 4, 100_003
	host := Staging(t, streams*copies*size)
	if err := d.Register(host); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Unregister(host); err != nil {
			t.Error(err)
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, streams)
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[s] = copyAndVerify(ctx, d, host[s*copies*size:(s+1)*copies*size], copies, size, byte(s))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func copyAndVerify(ctx context.Context, d gpu.Device, host []byte, copies, size int, seed byte) error {
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	ev, err := d.NewEvent()
	if err != nil {
		return err
	}
	defer ev.Close()
	p, err := d.Alloc(ctx, int64(copies*size))
	if err != nil {
		return err
	}
	for i := range copies {
		b := host[i*size : (i+1)*size]
		Fill(b, seed+byte(i))
		if err := s.CopyToDevice(p+gpu.Ptr(i*size), b); err != nil {
			return err
		}
		if err := s.Record(ev); err != nil {
			return err
		}
		if err := ev.Wait(ctx); err != nil {
			return err
		}
	}
	back := make([]byte, copies*size)
	if err := d.CopyToHost(ctx, back, p); err != nil {
		return err
	}
	if !bytes.Equal(back, host) {
		return fmt.Errorf("%s: the bytes copied back differ from the bytes copied", d.Name())
	}
	return d.Free(p)
}

func refusals(t *testing.T, d gpu.Device, _ int64) {
	ctx := context.Background()
	p, err := d.Alloc(ctx, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	host := Staging(t, 1<<20)
	heap := make([]byte, 1<<20)
	for _, tc := range []struct {
		name string
		op   func() error
		want string
	}{
		{"register the Go heap", func() error { return d.Register(heap) }, "not UMA arena memory"},
		{"copy from the Go heap", func() error { return s.CopyToDevice(p, heap) }, "not UMA arena memory"},
		{"copy from UMA memory the device did not register", func() error { return s.CopyToDevice(p, host[:4096]) }, "not registered with this device"},
		{"copy past the allocation", func() error {
			if err := d.Register(host); err != nil {
				return err
			}
			defer d.Unregister(host)
			return s.CopyToDevice(p+4096, host)
		}, "not inside one allocation"},
		{"register overlapping memory", func() error {
			if err := d.Register(host); err != nil {
				return err
			}
			defer d.Unregister(host)
			return d.Register(host[4096:8192])
		}, "overlaps"},
		{"unregister what was not registered", func() error { return d.Unregister(host) }, "not registered with this device"},
		{"free what was not allocated", func() error { return d.Free(p + 16) }, "not an allocation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	var me *gpu.MemoryError
	if err := d.Register(heap); !errors.As(err, &me) {
		t.Errorf("Register(Go heap) = %v, want a *gpu.MemoryError", err)
	}
}

func memory(t *testing.T, d gpu.Device, capacity int64) {
	ctx := context.Background()
	mi, err := d.MemInfo()
	if err != nil || mi.Total <= 0 || mi.Free > mi.Total || (capacity > 0 && (mi.Total != capacity || mi.Free != capacity)) {
		t.Fatalf("MemInfo = %+v, %v; want %d free of %d (0: any)", mi, err, capacity, capacity)
	}
	if _, err := d.Alloc(ctx, mi.Total+1); !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Fatalf("Alloc beyond the device's memory = %v, want gpu.ErrOutOfMemory", err)
	}
	if _, err := d.Alloc(ctx, 0); err == nil {
		t.Fatal("Alloc(0) succeeded")
	}
	p, err := d.Alloc(ctx, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if mi, _ := d.MemInfo(); capacity > 0 && mi.Free > capacity-1<<20 {
		t.Errorf("after a 1 MiB allocation MemInfo = %+v", mi)
	}
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Alloc(cctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Alloc with a cancelled context = %v", err)
	}
}

func events(t *testing.T, d gpu.Device, _ int64) {
	ctx := context.Background()
	ev, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(ctx); err != nil {
		t.Fatalf("Wait on an event never recorded = %v, want at once", err)
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ev); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ev); !errors.Is(err, gpu.ErrClosed) {
		t.Errorf("Record of a closed event = %v, want gpu.ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyToDevice(0, nil); err == nil {
		t.Error("CopyToDevice on a closed stream succeeded")
	}
}

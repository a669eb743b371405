//go:build linux

package sim

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/gpu/internal/devicetest"
)

func TestConformance(t *testing.T) {
	devicetest.Run(t, func(t *testing.T) (gpu.Device, int64) {
		d, err := Open(Config{Capacity: 64 << 20, Bandwidth: 50e9, Latency: time.Microsecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d, 64 << 20
	})
}

// TestModelledTime: the engine's busy time is latency + bytes/bandwidth per
// copy, whatever the machine's load (the figure is the model's, not a clock's).
func TestModelledTime(t *testing.T) {
	ctx := context.Background()
	d, err := Open(Config{Capacity: 8 << 20, Bandwidth: 1e9, Latency: 20 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	host := devicetest.Staging(t, 1<<20)
	if err := d.Register(host); err != nil {
		t.Fatal(err)
	}
	defer d.Unregister(host)
	p, _ := d.Alloc(ctx, 1<<20)
	defer d.Free(p)
	s, _ := d.NewStream()
	defer s.Close()
	for _, n := range []int{1000, 250_000, 1 << 20} {
		if err := s.CopyToDevice(p, host[:n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Synchronize(ctx); err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	want := 3*20*time.Microsecond + time.Duration(float64(1000+250_000+1<<20)/1e9*float64(time.Second))
	if st.Copies != 3 || st.Bytes != 1000+250_000+1<<20 || st.Busy != want {
		t.Fatalf("Stats = %+v; want 3 copies, %d bytes, busy %v", st, 1000+250_000+1<<20, want)
	}
	if !strings.HasPrefix(d.Name(), "simulated device (8 MiB, 1.0 GB/s host-to-device, 20µs per copy)") {
		t.Errorf("Name = %q", d.Name())
	}
}

// TestCopyHappensWhenTheEngineGetsToIt: a host buffer reused before its copy
// completed is copied with its new bytes and counted.
func TestCopyHappensWhenTheEngineGetsToIt(t *testing.T) {
	ctx := context.Background()
	d, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.hold.Lock() // the engine waits until the test lets it go
	held := true
	defer func() {
		if held {
			d.hold.Unlock()
		}
	}()
	host := devicetest.Staging(t, 8192)
	if err := d.Register(host); err != nil {
		t.Fatal(err)
	}
	defer d.Unregister(host)
	p, _ := d.Alloc(ctx, 8192)
	defer d.Free(p)
	s, _ := d.NewStream()
	defer s.Close()
	ev, _ := d.NewEvent()
	defer ev.Close()
	devicetest.Fill(host, 1)
	if err := s.CopyToDevice(p, host); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ev); err != nil {
		t.Fatal(err)
	}
	// Pending: freeing, unregistering and reading back are refused.
	if err := d.Free(p); err == nil || !strings.Contains(err.Error(), "pending copy") {
		t.Errorf("Free with a pending copy = %v", err)
	}
	if err := d.Unregister(host); err == nil || !strings.Contains(err.Error(), "pending copy") {
		t.Errorf("Unregister with a pending copy = %v", err)
	}
	back := make([]byte, 8192)
	if err := d.CopyToHost(ctx, back, p); err == nil || !strings.Contains(err.Error(), "pending copy") {
		t.Errorf("CopyToHost with a pending copy = %v", err)
	}
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if err := ev.Wait(short); err == nil {
		t.Fatal("Wait returned before the engine ran the copy")
	}
	devicetest.Fill(host, 2) // reused too early
	d.hold.Unlock()
	held = false
	if err := ev.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyToHost(ctx, back, p); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 8192)
	devicetest.Fill(want, 2)
	if !bytes.Equal(back, want) {
		t.Error("the copy took the bytes of enqueue time, not of copy time")
	}
	if st := d.Stats(); st.ChangedInFlight != 1 {
		t.Errorf("ChangedInFlight = %d, want 1", st.ChangedInFlight)
	}
}

func TestDiscardKeepsNoBytes(t *testing.T) {
	ctx := context.Background()
	d, err := Open(Config{Capacity: 1 << 40, Discard: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := d.Alloc(ctx, 1<<39) // half a TiB of "device memory", no host memory
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyToHost(ctx, make([]byte, 10), p); err == nil || !strings.Contains(err.Error(), "Discard") {
		t.Errorf("CopyToHost with Discard = %v", err)
	}
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Name(), "simulated") || !strings.Contains(d.Name(), "discarded") {
		t.Errorf("Name = %q", d.Name())
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{Capacity: -1}, {Bandwidth: -5}, {Latency: -time.Second}} {
		if _, err := Open(c); err == nil || !strings.Contains(err.Error(), "simulated device") {
			t.Errorf("Open(%+v) = %v, want an error", c, err)
		}
	}
}

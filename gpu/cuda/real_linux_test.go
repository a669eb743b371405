//go:build linux

package cuda_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/gpu/cuda"
	"github.com/psiflow/psiflow/gpu/internal/devicetest"
)

// EnvReal turns on the tests and benchmarks against the real driver
// (scripts/gpu-check.sh sets it on a machine with an NVIDIA GPU); the library is
// cuda.DefaultConfig's (PSIFLOW_LIBCUDA, else libcuda.so.1).
const EnvReal = "PSIFLOW_CUDA_REAL"

func openReal(tb testing.TB) *cuda.Device {
	tb.Helper()
	if os.Getenv(EnvReal) != "1" {
		tb.Skipf("needs an NVIDIA GPU: set %s=1 (scripts/gpu-check.sh does)", EnvReal)
	}
	d, err := cuda.Open(cuda.DefaultConfig(0))
	if err != nil {
		tb.Fatalf("%s=1 but the driver does not open: %v", EnvReal, err)
	}
	return d
}

// TestRealConformance runs the device suite against the real driver.
func TestRealConformance(t *testing.T) {
	openReal(t).Close()
	devicetest.Run(t, func(t *testing.T) (gpu.Device, int64) {
		d := openReal(t)
		t.Cleanup(func() { _ = d.Close() })
		return d, 0
	})
}

// TestRealCopyBack copies 256 MiB of random bytes from registered UMA memory in
// 8 MiB pieces on two streams and reads all of it back.
func TestRealCopyBack(t *testing.T) {
	d := openReal(t)
	defer d.Close()
	ctx := context.Background()
	const total, piece = 256 << 20, 8 << 20
	host := devicetest.Staging(t, total)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < total; i += 8 {
		v := rng.Uint64()
		for k := range 8 {
			host[i+k] = byte(v >> (8 * k))
		}
	}
	if err := d.Register(host); err != nil {
		t.Fatal(err)
	}
	defer d.Unregister(host)
	p, err := d.Alloc(ctx, total)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	var streams []gpu.Stream
	for range 2 {
		s, err := d.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		streams = append(streams, s)
	}
	for off := 0; off < total; off += piece {
		if err := streams[off/piece%2].CopyToDevice(p+gpu.Ptr(off), host[off:off+piece]); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range streams {
		if err := s.Synchronize(ctx); err != nil {
			t.Fatal(err)
		}
	}
	back := make([]byte, total)
	if err := d.CopyToHost(ctx, back, p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, host) {
		t.Fatal("the 256 MiB copied back differ from what was copied")
	}
	t.Logf("copy-back verified: %d MiB, %s", total>>20, d.Name())
}

// BenchmarkRealH2D times host-to-device copies of registered UMA memory with
// CUDA events, the way PyTorch's pinned .to('cuda', non_blocking=True) is timed
// in scripts/gpu-check.py, for the same sizes: one op is one copy on one stream.
func BenchmarkRealH2D(b *testing.B) {
	for _, size := range []int64{64 * 3 * 224 * 224, 64 << 20} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			d := openReal(b)
			defer d.Close()
			ctx := context.Background()
			host := devicetest.Staging(b, size)
			if err := d.Register(host); err != nil {
				b.Fatal(err)
			}
			defer d.Unregister(host)
			p, err := d.Alloc(ctx, size)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Free(p)
			s, _ := d.NewStream()
			defer s.Close()
			start, _ := d.NewTimingEvent()
			defer start.Close()
			end, _ := d.NewTimingEvent()
			defer end.Close()
			for range 3 { // warm up
				_ = s.CopyToDevice(p, host)
			}
			_ = s.Synchronize(ctx)
			b.SetBytes(size)
			b.ResetTimer()
			if err := s.Record(start); err != nil {
				b.Fatal(err)
			}
			n := 0
			for b.Loop() {
				if err := s.CopyToDevice(p, host); err != nil {
					b.Fatal(err)
				}
				n++
			}
			if err := s.Record(end); err != nil {
				b.Fatal(err)
			}
			if err := end.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			el, err := end.Elapsed(start)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(size)*float64(n)/el.Seconds()/1e9, "GB/s(events)")
		})
	}
}

//go:build linux

package h2d

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/gpu/sim"
	"github.com/psiflow/psiflow/tensor"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEnd measures what ending a graph on a device costs per batch
// against ending it on the host: the same decoded samples (64 × uint8
// 3×224×224, made once) go through batch → collate → sink (host) or batch →
// pin → h2d → mark-preemptible → sink (the simulated device at 25 GB/s,
// bytes discarded). cpu-ms/batch is the process's CPU time per batch; the
// difference between the two is the device end's cost, to be set against
// the decoding of 64 images (about 150 ms of CPU here).
func BenchmarkEnd(b *testing.B) {
	const batch, per = 64, 3 * 224 * 224
	mk := func(n int) []*tensor.Sample {
		ss := make([]*tensor.Sample, n)
		for i := range ss {
			s := &tensor.Sample{Key: strconv.Itoa(i)}
			u := s.Tensor.ReuseU8(per)
			s.Tensor.SetShape(3, 224, 224)
			for j := range u {
				u[j] = byte(i + j)
			}
			ss[i] = s
		}
		return ss
	}
	samples := mk(batch * 4)
	for _, end := range []string{"host", "sim"} {
		b.Run(end, func(b *testing.B) {
			var ring *Ring
			if end == "sim" {
				d, err := sim.Open(sim.Config{Capacity: 8 << 30, Bandwidth: 25e9, Discard: true})
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				u := newUMA(b)
				ring, err = NewRing(Config{UMA: u, Device: d, SlotBytes: batch * per, Budget: 64 << 20})
				if err != nil {
					b.Fatal(err)
				}
				defer ring.Close()
			}
			b.ResetTimer()
			cpu0 := cpuNow()
			batches := 0
			for b.Loop() {
				g := flow.New("bench")
				groups := flow.Batch(flow.FromSlice(g, "src", samples), "batch", batch, 0)
				if ring == nil {
					flow.Sink(flow.Via(groups, tensor.Collate("collate"), flow.QueueSize(1)), "sink", func(context.Context, *tensor.Batch) error { batches++; return nil })
				} else {
					ready := flow.Via(flow.Via(flow.Via(groups, Pin("pin", ring), flow.QueueSize(1)), H2D("h2d", ring), flow.QueueSize(1)), MarkPreemptible("mark"), flow.QueueSize(1))
					flow.Sink(ready, "sink", func(context.Context, *DeviceBatch) error { batches++; return nil })
				}
				if err := g.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuNow()-cpu0)/float64(time.Millisecond)/float64(batches), "cpu-ms/batch")
			b.ReportMetric(float64(b.Elapsed())/float64(time.Millisecond)/float64(batches), "wall-ms/batch")
			if ring != nil {
				st := ring.Stats()
				b.ReportMetric(float64(st.Registrations), "registrations")
			}
		})
	}
}

// BenchmarkDriverCalls counts the fake driver's calls per batch through pin →
// h2d → mark-preemptible (the goal: no registration per batch, a constant
// number of calls per copy).
func BenchmarkDriverCalls(b *testing.B) {
	dv := devices(b)[1]
	d := dv.open(b)
	u := newUMA(b)
	const batch, per = 16, 3 * 32 * 32
	r, err := NewRing(Config{UMA: u, Device: d, SlotBytes: batch * per, Slots: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	samples := make([]*tensor.Sample, batch*8)
	for i := range samples {
		s := &tensor.Sample{Key: strconv.Itoa(i)}
		s.Tensor.ReuseU8(per)
		s.Tensor.SetShape(3, 32, 32)
		samples[i] = s
	}
	names := []string{"", "cuMemHostRegister_v2", "cuMemHostUnregister", "cuMemAlloc_v2", "cuMemcpyHtoDAsync_v2", "cuEventRecord", "cuEventSynchronize", "cuEventCreate"}
	before := dv.calls(names...)
	batches := 0
	for b.Loop() {
		g := flow.New("calls")
		ready := flow.Via(flow.Via(flow.Via(flow.Batch(flow.FromSlice(g, "src", samples), "batch", batch, 0), Pin("pin", r)), H2D("h2d", r)), MarkPreemptible("mark"))
		flow.Sink(ready, "sink", func(context.Context, *DeviceBatch) error { batches++; return nil })
		if err := g.Run(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	after := dv.calls(names...)
	for _, n := range names {
		label := n
		if label == "" {
			label = "all"
		}
		b.ReportMetric(float64(after[n]-before[n])/float64(batches), label+"/batch")
	}
}

// BenchmarkOverlap shows on the simulated device that the copy of batch n
// runs while batch n+1 is decoded. The source "decodes" each batch of 16 ×
// float32 3×64×64 (768 KiB) by waiting decode (a stand-in that uses no CPU,
// so that a loaded machine does not blur the result), then pin → h2d →
// mark-preemptible → sink on gpu/sim, whose one copy engine takes copy per
// batch (its bandwidth is set so). overlapped is the stages as they are;
// serial is the baseline in which the next batch is decoded only once the
// previous one is on the device. Reported: wall-ms/batch, and hidden-% =
// (decode + copy − wall) / min(decode, copy): 100 when the shorter of the two
// is wholly hidden in the other, 0 when they run one after the other.
func BenchmarkOverlap(b *testing.B) {
	const batch, per, nbatches = 16, 3 * 64 * 64, 16
	const bytes = batch * per * 4
	samples := make([][]*tensor.Sample, nbatches)
	for i := range samples {
		for j := range batch {
			s := &tensor.Sample{Key: strconv.Itoa(i*batch + j)}
			s.Tensor.ReuseF32(per)
			s.Tensor.SetShape(3, 64, 64)
			samples[i] = append(samples[i], s)
		}
	}
	const decode = 10 * time.Millisecond
	for _, ratio := range []float64{0.5, 1, 2} { // copy / decode
		copyTime := time.Duration(ratio * float64(decode))
		for _, mode := range []string{"overlapped", "serial"} {
			b.Run(fmt.Sprintf("copy=%.1fx-decode/%s", ratio, mode), func(b *testing.B) {
				lat := 10 * time.Microsecond
				d, err := sim.Open(sim.Config{Capacity: 1 << 30, Bandwidth: float64(bytes) / (copyTime - lat).Seconds(), Latency: lat, Discard: true})
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				u := newUMA(b)
				ring, err := NewRing(Config{UMA: u, Device: d, SlotBytes: bytes, Slots: 8})
				if err != nil {
					b.Fatal(err)
				}
				defer ring.Close()
				n := 0
				b.ResetTimer()
				for b.Loop() {
					g := flow.New("overlap")
					onDevice := make(chan struct{}, 1) // serial: the previous batch is on the device
					onDevice <- struct{}{}
					src := flow.Source(g, "decode", func(ctx context.Context, out *flow.Emitter[[]*tensor.Sample]) error {
						for _, ss := range samples {
							if mode == "serial" {
								select {
								case <-onDevice:
								case <-ctx.Done():
									return ctx.Err()
								}
							}
							time.Sleep(decode)
							if err := out.Emit(ctx, ss); err != nil {
								return err
							}
						}
						return nil
					})
					ready := flow.Via(flow.Via(flow.Via(src, Pin("pin", ring), flow.QueueSize(1)), H2D("h2d", ring), flow.QueueSize(1)), MarkPreemptible("mark"), flow.QueueSize(1))
					flow.Sink(ready, "train", func(context.Context, *DeviceBatch) error {
						n++
						select {
						case onDevice <- struct{}{}:
						default:
						}
						return nil
					})
					if err := g.Run(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				wall := float64(b.Elapsed()) / float64(n)
				dm, cm := float64(decode), float64(copyTime)
				b.ReportMetric(wall/float64(time.Millisecond), "wall-ms/batch")
				b.ReportMetric(100*(dm+cm-wall)/min(dm, cm), "hidden-%")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

//go:build linux

package h2d

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/gpu/sim"
	"github.com/psiflow/psiflow/tensor"
)

// value is sample i's element j: what the device must hold.
func value(i, j int) float32 { return float32(i*1000 + j) }

// samples is a source of n float32 samples of shape (3, 8, 8), from a pool
// the graph returns them to.
func samples(g *flow.Graph, n int, pool *tensor.SamplePool) flow.Stream[*tensor.Sample] {
	return flow.Source(g, "samples", func(ctx context.Context, out *flow.Emitter[*tensor.Sample]) error {
		for i := range n {
			if err := out.Reserve(ctx, 3*8*8*4); err != nil {
				return err
			}
			s := pool.Get()
			s.Key, s.Label = strconv.Itoa(i), int64(i%10)
			f := s.Tensor.ReuseF32(3 * 8 * 8)
			s.Tensor.SetShape(3, 8, 8)
			for j := range f {
				f[j] = value(i, j)
			}
			if err := out.Emit(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestPipelineToDevice runs samples → batch → pin → h2d → mark-preemptible
// → a sink that reads every batch back from the device, on the simulated
// device and on the fake driver, under a byte budget.
func TestPipelineToDevice(t *testing.T) {
	for _, dv := range devices(t) {
		t.Run(dv.name, func(t *testing.T) {
			d := dv.open(t)
			u := newUMA(t)
			const n, batch = 203, 16
			r, err := NewRing(Config{UMA: u, Device: d, SlotBytes: batch * 3 * 8 * 8 * 4, Slots: 4})
			if err != nil {
				t.Fatal(err)
			}
			var before map[string]int64
			names := []string{"cuMemHostRegister_v2", "cuMemcpyHtoDAsync_v2", "cuEventRecord", "cuEventSynchronize", ""}
			if dv.calls != nil {
				before = dv.calls(names...)
			}
			var pool tensor.SamplePool
			g := flow.New("to-device", flow.WithBudget(1<<20))
			batches := flow.Batch(samples(g, n, &pool), "batch", batch, 0)
			pinned := flow.Via(batches, Pin("pin", r))
			copied := flow.Via(pinned, H2D("h2d", r))
			ready := flow.Via(copied, MarkPreemptible("mark"))
			seen := 0
			flow.Sink(ready, "train", func(ctx context.Context, b *DeviceBatch) error {
				if b.DType != tensor.Float32 || b.Shape[0] != b.Len() || b.Shape[1] != 3 || b.Shape[2] != 8 || b.Shape[3] != 8 {
					return fmt.Errorf("batch of %v %v", b.DType, b.Shape)
				}
				got, err := b.Float32s(ctx)
				if err != nil {
					return err
				}
				for k, key := range b.Keys {
					i, _ := strconv.Atoi(key)
					if i != seen+k || b.Labels[k] != int64(i%10) {
						return fmt.Errorf("sample %d: key %s label %d", seen+k, key, b.Labels[k])
					}
					for j := range 192 {
						if got[k*192+j] != value(i, j) {
							return fmt.Errorf("sample %d element %d on the device is %v, want %v", i, j, got[k*192+j], value(i, j))
						}
					}
				}
				seen += b.Len()
				return nil
			})
			if err := g.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if seen != n {
				t.Fatalf("%d samples reached the device, want %d", seen, n)
			}
			if g.Budget().InUse() != 0 {
				t.Errorf("budget in use after Run: %d", g.Budget().InUse())
			}
			st := r.Stats()
			nb := int64((n + batch - 1) / batch)
			if st.Copies != nb || st.InUse != 0 || st.Registrations > int64(r.Slots()) {
				t.Errorf("ring stats %+v; want %d copies, nothing in use, at most one registration per slot", st, nb)
			}
			if dv.calls != nil {
				after := dv.calls(names...)
				per := func(s string) int64 { return after[s] - before[s] }
				if per("cuMemcpyHtoDAsync_v2") != nb || per("cuEventRecord") != nb || per("cuEventSynchronize") != nb || per("cuMemHostRegister_v2") > int64(r.Slots()) {
					t.Errorf("driver calls for %d batches: copy %d, record %d, event sync %d, register %d, all %d", nb,
						per("cuMemcpyHtoDAsync_v2"), per("cuEventRecord"), per("cuEventSynchronize"), per("cuMemHostRegister_v2"), per(""))
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPipelineStopsCleanly: a sink that fails, and a cancelled run, leave
// every slot, device buffer and lease returned.
func TestPipelineStopsCleanly(t *testing.T) {
	for _, dv := range devices(t) {
		for _, how := range []string{"sink fails", "cancelled", "no mark stage"} {
			t.Run(dv.name+"/"+how, func(t *testing.T) {
				d := dv.open(t)
				u := newUMA(t)
				r, err := NewRing(Config{UMA: u, Device: d, SlotBytes: 8 * 3 * 8 * 8 * 4, Slots: 3, DeviceBytes: 2 * 8 * 3 * 8 * 8 * 4})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var pool tensor.SamplePool
				g := flow.New("stop", flow.WithBudget(1<<20))
				copied := flow.Via(flow.Via(flow.Batch(samples(g, 500, &pool), "batch", 8, 0), Pin("pin", r)), H2D("h2d", r))
				if how != "no mark stage" {
					copied = flow.Via(copied, MarkPreemptible("mark"))
				}
				boom := errors.New("boom")
				k := 0
				flow.Sink(copied, "train", func(ctx context.Context, b *DeviceBatch) error {
					if err := b.Ready(ctx); err != nil {
						return err
					}
					if k++; k == 5 {
						if how == "cancelled" {
							cancel()
							return nil
						}
						if how == "sink fails" {
							return boom
						}
					}
					return nil
				})
				err = g.Run(ctx)
				switch how {
				case "sink fails":
					if !errors.Is(err, boom) || !strings.Contains(err.Error(), "train") {
						t.Fatalf("Run = %v, want the sink's error naming it", err)
					}
				case "cancelled":
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("Run = %v, want context.Canceled", err)
					}
				default:
					if err != nil {
						t.Fatal(err)
					}
				}
				if err := r.Close(); err != nil {
					t.Fatalf("ring Close after the run: %v", err)
				}
			})
		}
	}
}

func TestPinRefusesBadBatches(t *testing.T) {
	d := devices(t)[0].open(t)
	u := newUMA(t)
	r, err := NewRing(Config{UMA: u, Device: d, SlotBytes: 4096, Slots: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	mk := func(key string, n int) *tensor.Sample {
		s := &tensor.Sample{Key: key}
		s.Tensor.ReuseU8(n)
		s.Tensor.SetShape(n)
		return s
	}
	for _, tc := range []struct {
		name string
		in   []*tensor.Sample
		want string
	}{
		{"too big", []*tensor.Sample{mk("a", 3000), mk("b", 3000)}, "more than a staging slot of 4096"},
		{"shapes differ", []*tensor.Sample{mk("a", 10), mk("odd.jpg", 11)}, "sample odd.jpg has uint8 [11]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := flow.New("bad")
			flow.Sink(flow.Via(flow.FromSlice(g, "src", [][]*tensor.Sample{tc.in}), Pin("pin", r)), "sink", func(context.Context, *Staged) error { return nil })
			if err := g.Run(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `pin "pin"`) {
				t.Fatalf("Run = %v, want %q", err, tc.want)
			}
			if st := r.Stats(); st.InUse != 0 {
				t.Fatalf("a refused batch kept its slot: %+v", st)
			}
		})
	}
}

// TestVerify: the verify stage passes batches whose device bytes equal their
// staging slot's, and names the batch and the offset when they differ, when
// the slot went back already, and when the device keeps no bytes.
func TestVerify(t *testing.T) {
	discard := device{name: "sim-discard", open: func(t testing.TB) gpu.Device {
		d, err := sim.Open(sim.Config{Discard: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}}
	for _, dv := range append(devices(t), discard) {
		for _, tc := range []struct {
			how  string
			want string // "" when every batch passes
		}{
			{"equal", ""},
			{"corrupted", "differs on the device from its staging slot at byte 100 of"},
			{"after mark", "has given its staging slot back already"},
		} {
			if dv.name == "sim-discard" && tc.how != "equal" {
				continue
			}
			t.Run(dv.name+"/"+tc.how, func(t *testing.T) {
				d := dv.open(t)
				u := newUMA(t)
				r, err := NewRing(Config{UMA: u, Device: d, SlotBytes: 8 * 3 * 8 * 8 * 4, Slots: 3})
				if err != nil {
					t.Fatal(err)
				}
				var pool tensor.SamplePool
				g := flow.New("verify", flow.WithBudget(1<<20))
				copied := flow.Via(flow.Via(flow.Batch(samples(g, 50, &pool), "batch", 8, 0), Pin("pin", r)), H2D("h2d", r))
				switch tc.how {
				case "corrupted":
					k := 0
					copied = flow.Tap(copied, "corrupt", func(b *DeviceBatch) {
						if k++; k == 3 {
							_ = b.Ready(context.Background())
							b.staged.Bytes()[100]++ // the slot no longer holds what was copied
						}
					})
				case "after mark":
					copied = flow.Via(copied, MarkPreemptible("mark-first"))
				}
				checked := flow.Via(copied, Verify("verify"))
				if tc.how != "after mark" {
					checked = flow.Via(checked, MarkPreemptible("mark"))
				}
				n := 0
				flow.Sink(checked, "train", func(context.Context, *DeviceBatch) error { n++; return nil })
				err = g.Run(context.Background())
				switch {
				case dv.name == "sim-discard":
					if err == nil || !strings.Contains(err.Error(), `verify "verify": the batch starting at 0`) {
						t.Fatalf("Run on a device that keeps no bytes = %v, want verify's error", err)
					}
				case tc.want == "":
					if err != nil || n != 7 {
						t.Fatalf("Run = %v after %d batches, want 7 verified", err, n)
					}
				default:
					if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `verify "verify": the batch starting at`) {
						t.Fatalf("Run = %v, want %q", err, tc.want)
					}
				}
				if err := r.Close(); err != nil {
					t.Fatalf("ring Close: %v", err)
				}
			})
		}
	}
}

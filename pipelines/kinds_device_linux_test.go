//go:build linux

package pipelines

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/psiflow/psiflow/gpu/cuda"
	"github.com/psiflow/psiflow/gpu/h2d"
	"github.com/psiflow/psiflow/internal/fakecuda"
	"github.com/psiflow/psiflow/pipelines/progress"
	"github.com/psiflow/psiflow/tensor"
)

func init() {
	afterTests = append(afterTests, fakecuda.Cleanup) // the fake CUDA drivers these tests build
}

// toDevice is a pipeline that ends on a device: 30 generated images, decoded
// to uint8 3×16×16, in batches of 8 (the last one 6), pinned, copied and
// handed on, then discarded.
const toDevice = `name: dev
source:
  kind: generate
  config: {items: 30, width: 24, height: 20, distinct: 3}
stages:
  - {kind: decode, config: {resize: 16, center_crop: 16, workers: 2}}
  - {kind: batch, config: {size: 8}}
  - pin
  - h2d
  - {kind: mark_preemptible, config: {verify: true}}
sink: discard
resources: {budget: 16MiB, pressure: off}
`

// counter reads a counter or gauge (summed over labels matching label=value,
// or all) from reg.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, found := 0.0, false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if label != "" && !hasLabel(m, label, value) {
				continue
			}
			found = true
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	if !found {
		t.Fatalf("no metric %s{%s=%q}", name, label, value)
	}
	return sum
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.Label {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

// TestPipelineToDevice runs the device kinds from a pipeline file on the
// simulated device and on the fake CUDA driver: every batch reaches the Go
// consumer ready on the device with its shape and keys, verify compares each
// with its staging slot, the ring's metrics are registered, nothing is
// registered per batch, and everything the run opened is given back.
func TestPipelineToDevice(t *testing.T) {
	lib := fakecuda.Build(t, fakecuda.Full)
	fake := fakecuda.Open(t, lib)
	for _, tc := range []struct {
		device string
		epochs int
		info   string // in the device's Info line
	}{
		{"sim", 1, "device: simulated"},
		{"sim", 4, "device: simulated"},
		{"cuda", 2, "device: cuda:0"},
		{"auto", 1, "device: cuda:0"},
	} {
		t.Run(fmt.Sprintf("%s/%d-epochs", tc.device, tc.epochs), func(t *testing.T) {
			t.Setenv(cuda.EnvLibrary, lib)
			fake.TakeViolations()
			before := fake.Counts("cuMemcpyHtoDAsync_v2", "cuMemHostRegister_v2")
			p, err := Parse("dev.yaml", []byte(toDevice), Options{Set: []string{"resources.device=" + tc.device, fmt.Sprintf("epochs=%d", tc.epochs)}})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"sim": "sim", "cuda": "cuda", "auto": "cuda"}[tc.device]
			if p.Device() != want {
				t.Fatalf("Device() = %q, want %q", p.Device(), want)
			}
			reg := prometheus.NewRegistry()
			var mu sync.Mutex
			var info []string
			batches, samples := 0, 0
			var copies, regs, slots float64 // the ring's metrics after the last epoch (they go with the run)
			var firstRegs float64           // registrations after the first epoch
			sum, err := Run(context.Background(), p, Hooks{Registerer: reg,
				OnEpoch: func(n int, _ progress.Epoch) {
					if n == 0 {
						firstRegs = counter(t, reg, "psiflow_gpu_staging_registrations_total", "", "")
					}
					copies = counter(t, reg, "psiflow_gpu_copies_total", "", "")
					regs = counter(t, reg, "psiflow_gpu_staging_registrations_total", "", "")
					slots = counter(t, reg, "psiflow_gpu_staging_slots", "state", "total")
				},
				Info: func(s string) { mu.Lock(); info = append(info, s); mu.Unlock() },
				DeviceBatches: func(ctx context.Context, b *h2d.DeviceBatch) error {
					if b.DType != tensor.Uint8 || len(b.Shape) != 4 || b.Shape[0] != b.Len() || b.Shape[1] != 3 || b.Shape[2] != 16 || b.Shape[3] != 16 {
						return fmt.Errorf("batch of %v %v", b.DType, b.Shape)
					}
					if b.Bytes != int64(b.Len()*3*16*16) || b.Ptr == 0 || len(b.Keys) != b.Len() {
						return fmt.Errorf("batch of %d bytes at %#x with %d keys", b.Bytes, b.Ptr, len(b.Keys))
					}
					if err := b.Ready(ctx); err != nil {
						return err
					}
					batches++
					samples += b.Len()
					return nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			nb := tc.epochs * 4
			if sum.Items != int64(30*tc.epochs) || samples != 30*tc.epochs || batches != nb {
				t.Fatalf("delivered %d samples, the consumer saw %d in %d batches; want %d in %d", sum.Items, samples, batches, 30*tc.epochs, nb)
			}
			joined := strings.Join(info, "\n")
			if !strings.Contains(joined, tc.info) || !strings.Contains(joined, "staging ring: ") {
				t.Errorf("info lines lack %q and the staging ring:\n%s", tc.info, joined)
			}
			if copies != float64(nb) {
				t.Errorf("psiflow_gpu_copies_total = %v, want %d", copies, nb)
			}
			if mfs, _ := reg.Gather(); len(mfs) > 0 {
				for _, mf := range mfs {
					if strings.HasPrefix(mf.GetName(), "psiflow_gpu_") {
						t.Errorf("%s still registered after the run", mf.GetName())
					}
				}
			}
			// A slot is held from pin until mark_preemptible gives it back: at most
			// the four stages (pin, h2d, verify, mark) and the three queues of one
			// element between them, so a run registers at most 7 slots, however
			// many batches it copies.
			const inFlight = 7
			if regs < 1 || regs > slots || regs < firstRegs || regs > inFlight {
				t.Errorf("%v slot registrations for %d batches over a ring of %v slots (%v in the first epoch): want at most one per slot in flight (%d), not one per batch", regs, nb, slots, firstRegs, inFlight)
			}
			if tc.device == "sim" {
				return
			}
			after := fake.Counts("cuMemcpyHtoDAsync_v2", "cuMemHostRegister_v2")
			if n := after["cuMemcpyHtoDAsync_v2"] - before["cuMemcpyHtoDAsync_v2"]; n != int64(nb) {
				t.Errorf("%d asynchronous copies on the driver for %d batches", n, nb)
			}
			if n := after["cuMemHostRegister_v2"] - before["cuMemHostRegister_v2"]; float64(n) != regs {
				t.Errorf("%d registrations on the driver, the ring counted %v", n, regs)
			}
			for _, k := range []string{"alloc", "reg", "stream", "event", "pending"} {
				if n := fake.Live(k); n != 0 {
					t.Errorf("the fake driver still has %d live %s after the run", n, k)
				}
			}
			fake.CheckNoViolations(t)
		})
	}
}

// TestPipelineDeviceErrors: what is refused, and how it is named, when a
// pipeline that copies to a device cannot run.
func TestPipelineDeviceErrors(t *testing.T) {
	lib := fakecuda.Build(t, fakecuda.Full)
	missing := filepath.Join(t.TempDir(), "libcuda.so.1")
	for _, tc := range []struct {
		name string
		file string
		sets []string
		lib  string
		hook string // "batches", "device" or ""
		want []string
	}{
		{"auto without a driver", toDevice, nil, missing, "", []string{`stage "pin" (kind pin, dev.yaml:8:5)`, "resources.device auto", "no driver", "set resources.device: sim"}},
		{"cuda without a driver", toDevice, []string{"resources.device=cuda"}, missing, "", []string{"resources.device cuda", "no driver", "set resources.device: sim"}},
		{"staging too small", toDevice, []string{"resources.device=sim", "pin.staging=4KiB"}, lib, "", []string{`pin "pin"`, "holds fewer than two staging slots"}},
		{"Hooks.Batches on a device pipeline", toDevice, []string{"resources.device=sim"}, lib, "batches", []string{"Hooks.Batches", "device_batch"}},
		{"Hooks.DeviceBatches on a host pipeline", good, nil, lib, "device", []string{"Hooks.DeviceBatches: input is batch"}},
		{"sim without verify keeps no bytes", strings.Replace(toDevice, "verify: true", "verify: false", 1), []string{"resources.device=sim"}, lib, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(cuda.EnvLibrary, tc.lib)
			p, err := Parse("dev.yaml", []byte(tc.file), Options{Set: tc.sets})
			if err != nil {
				if tc.want == nil {
					t.Fatal(err)
				}
				t.Fatalf("Parse: %v (want a run-time error)", err)
			}
			var hooks Hooks
			switch tc.hook {
			case "batches":
				hooks.Batches = func(context.Context, *tensor.Batch) error { return nil }
			case "device":
				hooks.DeviceBatches = func(context.Context, *h2d.DeviceBatch) error { return nil }
			}
			_, err = Run(context.Background(), p, hooks)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Run = %v, want success", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Run succeeded, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Run = %v\nwant it to say %q", err, w)
				}
			}
		})
	}
}

// TestPinsMustAgree: two pin stages share the pipeline's one staging ring, so
// different ring settings are refused naming both.
func TestPinsMustAgree(t *testing.T) {
	file := `source: {kind: generate, config: {items: 8, width: 16, height: 16, distinct: 1}}
stages:
  - {kind: decode, config: {resize: 8, center_crop: 8}}
  - {kind: batch, config: {size: 4}}
  - {kind: pin, name: p1, config: {after_copy: evict}}
  - {kind: pin, name: p2, input: batch}
  - {kind: h2d, input: [p1, p2]}
  - mark_preemptible
sink: discard
resources: {device: sim, budget: 8MiB, pressure: off}
`
	p, err := Parse("two.yaml", []byte(file), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), p, Hooks{})
	if err == nil || !strings.Contains(err.Error(), `stages "p1" (two.yaml:5:12) and "p2" (two.yaml:6:12) share the pipeline's staging ring but set after_copy to evict and preemptible`) {
		t.Fatalf("Run = %v, want the disagreement named", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Fatal("cancelled")
	}
}

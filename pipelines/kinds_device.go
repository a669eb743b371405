package pipelines

import (
	"context"
	"errors"
	"fmt"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/gpu/cuda"
	"github.com/psiflow/psiflow/gpu/h2d"
	"github.com/psiflow/psiflow/gpu/sim"
	"github.com/psiflow/psiflow/internal/bytesize"
	"github.com/psiflow/psiflow/memory"
	"github.com/psiflow/psiflow/tensor"
)

// The element types of the device kinds.
var (
	StagedType = NewType("staged", "*h2d.Staged: a batch collated into a slot of the staging ring registered with the device (resources.device), not yet copied",
		func(s *h2d.Staged) (int64, int64) { return int64(s.Len()), s.Size() })
	DeviceBatchType = NewType("device_batch", "*h2d.DeviceBatch: a batch in device memory (keys, labels, dtype, shape, device address); releasing it returns its device buffer",
		func(b *h2d.DeviceBatch) (int64, int64) { return int64(b.Len()), b.Size() })
)

// The simulated device of resources.device: sim.
const (
	simCapacity  = 8 << 30
	simBandwidth = 25e9
)

// ringParams and copyParams are the parameters of pin and h2d that configure
// the pipeline's one staging ring: every pin (every h2d) node must agree.
var (
	ringParams = []string{"samples", "staging", "after_copy", "keep_registered"}
	copyParams = []string{"streams", "device_memory"}
)

// deviceKinds are the kinds that end a pipeline on a device.
func deviceKinds() []Kind {
	return []Kind{
		{
			Name: "pin", Role: StageRole, In: "images", Out: "staged", Device: true,
			Doc: "collates each list of images straight into a slot of a staging ring of UMA memory registered with the device (resources.device): the batch tensor is written once, into memory the device reads by DMA, and no slot is registered per batch",
			Params: []Param{
				IntParam("samples", 0, 0, 1<<20, "samples a staging slot holds; 0: the size of the batch stage it reads"),
				BytesParam("staging", 0, 0, 1<<50, "the staging ring's bytes (untouched slots cost nothing); 0: the byte budget (resources.budget, auto: a quarter of the memory limit)"),
				EnumParam("after_copy", "preemptible", []string{"preemptible", "evict", "keep"}, "a slot the ring no longer keeps registered once its copy completed (UMA's post-GPU policy): preemptible (unregistered, then PREEMPTIBLE: MADV_FREE), evict (unregistered, pages given back at once) or keep (stays registered)"),
				IntParam("keep_registered", 2, 1, 1<<16, "fewest slots kept registered with the device (beyond it: the recent peak of slots in use)"),
			},
			Build: buildPin,
		},
		{
			Name: "h2d", Role: StageRole, In: "staged", Out: "device_batch", Device: true,
			Doc: "copies each staged batch to the device asynchronously, on copy streams used in turn, and does not wait: the copy of batch n overlaps the decoding of batch n+1; waits while the device memory quota is full",
			Params: []Param{
				IntParam("streams", 2, 1, 64, "copy streams used in turn"),
				BytesParam("device_memory", 0, 0, 1<<50, "the device memory quota of batches on the device (psiflow_gpu_quota_*); 0: one batch per staging slot, at most half the device's free memory"),
			},
			Build: buildH2D,
		},
		{
			Name: "mark_preemptible", Role: StageRole, In: "device_batch", Out: "device_batch", Device: true,
			Doc: "waits for each batch's copy, in order, then gives its staging slot back per pin's after_copy; the batch goes on, ready on the device",
			Params: []Param{
				BoolParam("verify", false, "first copy every batch back and compare it with its staging slot (a check, not for training: one synchronous copy back per batch)"),
			},
			Build: buildMarkPreemptible,
		},
	}
}

// Device is the device the pipeline's device stages copy to: resources.device
// with auto resolved (cuda when a stage copies to a device, else cpu).
func (p *Pipeline) Device() string {
	if p.Resource.Device != "auto" {
		return p.Resource.Device
	}
	for _, c := range p.Nodes() {
		if c.Kind.Device {
			return "cuda"
		}
	}
	return "cpu"
}

// onDevice is what a run keeps for its device stages: the device and the
// staging ring made by the first batch (its arena in the runtime's UMA).
type onDevice struct {
	dev  gpu.Device
	ring *h2d.Lazy
}

// deviceOf opens the run's device and staging ring, once per run (every epoch's
// pin and h2d share them). The ring's arena lives in the runtime's UMA, and its
// idle slots go back at the runtime's shed ([memory.ActionStagingRing]).
func deviceOf(b *Build) (*onDevice, error) {
	v, err := b.Shared("gpu device", func() (any, func() error, error) {
		p := b.Pipeline
		cfg, samples, verify, err := ringConfig(p)
		if err != nil {
			return nil, nil, err
		}
		u := b.Runtime.UMA()
		if u == nil {
			return nil, nil, errors.New("the staging ring needs UMA, which this platform lacks (a device stage runs on Linux)")
		}
		dev, err := openDevice(p, verify)
		if err != nil {
			return nil, nil, err
		}
		b.Info("device: %s", dev.Name())
		cfg.UMA, cfg.Device = u, dev
		reg := b.run.hooks.Registerer
		var registered *h2d.Ring
		lazy, err := h2d.NewLazy(cfg, samples, func(r *h2d.Ring) {
			b.Info("staging ring: %d slots of %s (%d samples), device memory quota %s", r.Slots(), bytesize.Human(r.SlotBytes()), samples, bytesize.Human(r.Quota().Limit()))
			if reg != nil {
				if err := reg.Register(r); err != nil {
					b.Info("staging ring metrics not registered: %v", err)
				} else {
					registered = r
				}
			}
		})
		if err != nil {
			return nil, nil, errors.Join(err, dev.Close())
		}
		b.Runtime.OnShed(memory.ActionStagingRing, func(context.Context) (int64, error) { return lazy.Shed() })
		od := &onDevice{dev: dev, ring: lazy}
		return od, func() error {
			// The ring first (it unregisters its slots, frees its buffers and
			// unmaps its arena), then the device; the runtime's UMA closes after.
			if registered != nil {
				reg.Unregister(registered)
			}
			err := lazy.Close()
			return errors.Join(err, dev.Close())
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*onDevice), nil
}

// openDevice opens resources.device; auto is CUDA device 0, and its missing
// driver is named with what to do instead.
func openDevice(p *Pipeline, keepBytes bool) (gpu.Device, error) {
	switch p.Device() {
	case "sim":
		return sim.Open(sim.Config{Capacity: simCapacity, Bandwidth: simBandwidth, Discard: !keepBytes})
	case "cuda":
		d, err := cuda.Open(cuda.DefaultConfig(0))
		if err != nil {
			hint := ""
			if errors.Is(err, gpu.ErrNoDriver) || errors.Is(err, gpu.ErrNoDevice) {
				hint = "; set resources.device: sim to simulate one (psiflow doctor shows the CUDA driver)"
			}
			return nil, fmt.Errorf("resources.device %s: %w%s", p.Resource.Device, err, hint)
		}
		return d, nil
	}
	return nil, fmt.Errorf("resources.device %s: the pipeline has no device", p.Resource.Device)
}

// ringConfig is the staging ring's configuration from the pipeline's pin and
// h2d nodes (which must agree), the samples a slot holds, and whether a
// mark_preemptible node verifies (the simulated device then keeps its bytes).
func ringConfig(p *Pipeline) (h2d.Config, int, bool, error) {
	var pin, cp *Component
	samples := 0
	verify := false
	for _, c := range p.Stages {
		switch c.Kind.Name {
		case "pin":
			if pin != nil {
				if err := agree(pin, c, ringParams); err != nil {
					return h2d.Config{}, 0, false, err
				}
			}
			pin = c
			n, err := slotSamples(p, c)
			if err != nil {
				return h2d.Config{}, 0, false, err
			}
			samples = max(samples, n)
		case "h2d":
			if cp != nil {
				if err := agree(cp, c, copyParams); err != nil {
					return h2d.Config{}, 0, false, err
				}
			}
			cp = c
		case "mark_preemptible":
			verify = verify || c.Config.Bool("verify")
		}
	}
	if pin == nil || cp == nil {
		return h2d.Config{}, 0, false, errors.New("a pipeline that copies to a device needs a pin and an h2d stage")
	}
	staging := pin.Config.Int("staging")
	if staging == 0 {
		staging = p.Resource.Budget
	}
	if staging == 0 {
		b, _, err := memory.DefaultByteBudget(0)
		if err != nil {
			return h2d.Config{}, 0, false, fmt.Errorf("pin %q: staging 0 follows the budget, auto: %w", pin.Name, err)
		}
		staging = b
	}
	cfg := h2d.Config{Name: "staging " + pin.Name, Budget: staging, AfterCopy: h2d.AfterCopy(pin.Config.String("after_copy")),
		KeepRegistered: int(pin.Config.Int("keep_registered")), Streams: int(cp.Config.Int("streams")), DeviceBytes: cp.Config.Int("device_memory")}
	return cfg, samples, verify, nil
}

// slotSamples is the samples a slot of pin c holds: its samples parameter,
// else the size of the batch stage it reads.
func slotSamples(p *Pipeline, c *Component) (int, error) {
	if n := c.Config.Int("samples"); n > 0 {
		return int(n), nil
	}
	n := 0
	for _, in := range c.Inputs {
		for _, s := range p.Stages {
			if s.Name == in && s.Kind.Name == "batch" {
				n = max(n, int(s.Config.Int("size")))
			}
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("stage %q (kind pin, %s): it reads %v, not a batch stage; set samples: N (the most samples in one of its batches)", c.Name, c.Pos, c.Inputs)
	}
	return n, nil
}

// agree reports the first of params that nodes a and b set differently.
func agree(a, b *Component, params []string) error {
	for _, name := range params {
		if va, vb := a.Config.Value(name), b.Config.Value(name); fmt.Sprint(va) != fmt.Sprint(vb) {
			return fmt.Errorf("stages %q (%s) and %q (%s) share the pipeline's staging ring but set %s to %v and %v", a.Name, a.Pos, b.Name, b.Pos, name, va, vb)
		}
	}
	return nil
}

func buildPin(b *Build, _ *Config, in Stream) (Stream, error) {
	groups, err := Unwrap[[]*tensor.Sample](in)
	if err != nil {
		return Stream{}, err
	}
	od, err := deviceOf(b)
	if err != nil {
		return Stream{}, err
	}
	return Wrap(StagedType, flow.Via(groups, od.ring.Pin(b.Name), flow.QueueSize(1)))
}

func buildH2D(b *Build, _ *Config, in Stream) (Stream, error) {
	staged, err := Unwrap[*h2d.Staged](in)
	if err != nil {
		return Stream{}, err
	}
	od, err := deviceOf(b)
	if err != nil {
		return Stream{}, err
	}
	return Wrap(DeviceBatchType, flow.Via(staged, od.ring.H2D(b.Name), flow.QueueSize(1)))
}

func buildMarkPreemptible(b *Build, cfg *Config, in Stream) (Stream, error) {
	batches, err := Unwrap[*h2d.DeviceBatch](in)
	if err != nil {
		return Stream{}, err
	}
	if cfg.Bool("verify") {
		batches = flow.Via(batches, h2d.Verify(b.Name+"-verify"), flow.QueueSize(1))
	}
	return Wrap(DeviceBatchType, flow.Via(batches, h2d.MarkPreemptible(b.Name), flow.QueueSize(1)))
}

// deviceConsumer passes every device batch to consume before the sink (a
// Go training loop's Hooks.DeviceBatches).
func deviceConsumer(in Stream, consume func(context.Context, *h2d.DeviceBatch) error) (Stream, error) {
	batches, err := Unwrap[*h2d.DeviceBatch](in)
	if err != nil {
		return Stream{}, fmt.Errorf("Hooks.DeviceBatches: %w", err)
	}
	return Wrap(DeviceBatchType, flow.Filter(batches, "consumer", func(ctx context.Context, b *h2d.DeviceBatch) (bool, error) {
		return true, consume(ctx, b)
	}))
}

package h2d

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/psiflow/psiflow/gpu"
	"github.com/psiflow/psiflow/stage"
	"github.com/psiflow/psiflow/tensor"
)

// Staged is a batch collated into a staging slot: its keys, labels, the
// batch tensor's element type and shape ([n, sample shape...]); the elements
// are in the slot. The graph releases it, which returns the slot (after its
// copy, if one was made).
type Staged struct {
	Keys   []string
	Labels []int64
	DType  tensor.DType
	Shape  []int
	slot   *Slot
	n      int64
}

// Bytes are the batch's elements in the slot (registered memory).
func (s *Staged) Bytes() []byte { return s.slot.Bytes()[:s.n] }

// Len is the number of samples.
func (s *Staged) Len() int { return len(s.Keys) }

// Size is the batch's bytes.
func (s *Staged) Size() int64 { return s.n }

// Release returns the slot to its ring (waiting for a pending copy first).
func (s *Staged) Release() { s.slot.Release() }

// Pin returns a stage that collates each slice of samples (from flow.Batch)
// straight into a free slot of r, in place of tensor.Collate: the batch
// tensor is written once, into memory the device reads by DMA, and no slot
// is registered per batch. It waits while every slot holds a batch. All
// samples must have the same type and shape, and the batch must fit in a
// slot; otherwise the error names the sample or the sizes.
func Pin(name string, r *Ring) stage.Stage[[]*tensor.Sample, *Staged] {
	return pin(name, "the ring's Config.SlotBytes", func(context.Context, int64) (*Ring, error) { return r, nil })
}

// pin is Pin on the ring ringFor returns for samples of a size; sized says
// what sized the ring's slots (for the error of a batch too large).
func pin(name, sized string, ringFor func(ctx context.Context, sampleBytes int64) (*Ring, error)) stage.Stage[[]*tensor.Sample, *Staged] {
	return stage.Apply(name, 1, true, func(ctx context.Context, ss []*tensor.Sample) (*Staged, error) {
		if len(ss) == 0 {
			return nil, fmt.Errorf("pin %q: an empty batch", name)
		}
		first := &ss[0].Tensor
		per := first.NBytes()
		n := per * int64(len(ss))
		r, err := ringFor(ctx, per)
		if err != nil {
			return nil, fmt.Errorf("pin %q: %w", name, err)
		}
		if n > r.SlotBytes() {
			return nil, fmt.Errorf("pin %q: a batch of %d × %v %v is %d bytes, more than a staging slot of %d (%s)",
				name, len(ss), first.Shape, first.DType, n, r.SlotBytes(), sized)
		}
		slot, err := r.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("pin %q: %w", name, err)
		}
		st := &Staged{DType: first.DType, Shape: append([]int{len(ss)}, first.Shape...), slot: slot, n: n,
			Keys: make([]string, len(ss)), Labels: make([]int64, len(ss))}
		dst := slot.Bytes()
		for i, s := range ss {
			t := &s.Tensor
			if t.DType != first.DType || !slices.Equal(t.Shape, first.Shape) || t.NBytes() != per {
				slot.Release()
				return nil, fmt.Errorf("pin %q: sample %s has %v %v, the batch %v %v", name, s.Key, t.DType, t.Shape, first.DType, first.Shape)
			}
			copy(dst[int64(i)*per:int64(i+1)*per], t.Bytes())
			st.Keys[i], st.Labels[i] = s.Key, s.Label
		}
		return st, nil
	})
}

// DeviceBatch is a batch in device memory: keys, labels, element type and
// shape, and where its elements are. It comes from [H2D]; the copy is
// complete once [DeviceBatch.Ready] returns (after [MarkPreemptible] it is).
// The graph releases it, which returns its device buffer.
type DeviceBatch struct {
	Keys   []string
	Labels []int64
	DType  tensor.DType
	Shape  []int
	// Ptr is the batch's device address; Bytes its length.
	Ptr   gpu.Ptr
	Bytes int64

	staged   *Staged
	ring     *Ring
	released atomic.Bool
}

// Device is the device the batch is on.
func (b *DeviceBatch) Device() gpu.Device { return b.ring.Device() }

// Len is the number of samples.
func (b *DeviceBatch) Len() int { return len(b.Keys) }

// Size is the batch's bytes.
func (b *DeviceBatch) Size() int64 { return b.Bytes }

// Ready returns when the copy to the device has completed.
func (b *DeviceBatch) Ready(ctx context.Context) error { return b.staged.slot.Wait(ctx) }

// CopyToHost copies the batch back into dst (len(dst) = Bytes), once ready:
// for verification.
func (b *DeviceBatch) CopyToHost(ctx context.Context, dst []byte) error {
	if int64(len(dst)) != b.Bytes {
		return fmt.Errorf("gpu: copy back of a %d-byte batch into %d bytes", b.Bytes, len(dst))
	}
	if err := b.Ready(ctx); err != nil {
		return err
	}
	return b.Device().CopyToHost(ctx, dst, b.Ptr)
}

// Float32s reads a float32 batch back as float32s (verification).
func (b *DeviceBatch) Float32s(ctx context.Context) ([]float32, error) {
	if b.DType != tensor.Float32 {
		return nil, fmt.Errorf("gpu: batch is %v, not float32", b.DType)
	}
	out := make([]float32, b.Bytes/4)
	if err := b.CopyToHost(ctx, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(out))), len(out)*4)); err != nil {
		return nil, err
	}
	return out, nil
}

// Release waits for the copy (so that no DMA still writes the buffer),
// returns the staging slot if nothing did, and gives the device buffer back
// to the ring's pool. A second Release does nothing.
func (b *DeviceBatch) Release() {
	if b.released.Swap(true) {
		return
	}
	b.staged.slot.Release()
	b.ring.PutBuffer(b.Ptr)
}

// H2D returns a stage that copies each staged batch to the device: a device
// buffer from the ring's pool (waiting while the device memory quota is
// full), the slot locked for the transfer in UMA (LOCKED_TX), an
// asynchronous copy on the next of the ring's streams and an event after
// it. It does not wait for the copy: while batch n is copied, batch n+1 is
// decoded and staged. Its output is the batch on the device.
func H2D(name string, r *Ring) stage.Stage[*Staged, *DeviceBatch] {
	return h2d(name, func() *Ring { return r })
}

// h2d is H2D on the ring ring returns.
func h2d(name string, ring func() *Ring) stage.Stage[*Staged, *DeviceBatch] {
	return stage.Apply(name, 1, true, func(ctx context.Context, st *Staged) (*DeviceBatch, error) {
		r := ring()
		if st.slot.r != r {
			return nil, fmt.Errorf("h2d %q: the batch was staged in another ring", name)
		}
		p, err := st.slot.Copy(ctx, st.n)
		if err != nil {
			return nil, fmt.Errorf("h2d %q: %w", name, err)
		}
		stage.Keep(ctx) // the slot lives on with the batch until its copy is done
		return &DeviceBatch{Keys: st.Keys, Labels: st.Labels, DType: st.DType, Shape: st.Shape,
			Ptr: p, Bytes: st.n, staged: st, ring: r}, nil
	})
}

// MarkPreemptible returns a stage that waits for each batch's copy, in
// order, and then gives its staging slot back: the slot's chunk becomes
// COPIED_GPU in UMA and, per the ring's post-GPU policy, stays registered
// for the next batch or is unregistered and marked PREEMPTIBLE (see
// [Ring]). The batch then travels on, ready on the device.
func MarkPreemptible(name string) stage.Stage[*DeviceBatch, *DeviceBatch] {
	return stage.Apply(name, 1, true, func(ctx context.Context, b *DeviceBatch) (*DeviceBatch, error) {
		if err := b.staged.slot.Finish(ctx); err != nil {
			return nil, fmt.Errorf("mark-preemptible %q: %w", name, err)
		}
		return b, nil
	})
}

// Verify returns a stage that checks each batch on the device against its
// staging slot: it waits for the copy, copies the batch back to the host and
// compares it with the bytes staged; a difference is an error naming the
// batch's first key and the first offset that differs. Put it before
// [MarkPreemptible], which gives the slot back (a batch whose slot came back
// is refused). It costs a synchronous copy back per batch: it is for checks,
// not training. The device must keep what is copied to it (gpu/sim without
// Discard).
func Verify(name string) stage.Stage[*DeviceBatch, *DeviceBatch] {
	var back []byte // one worker: one scratch buffer, grown to the largest batch
	return stage.Apply(name, 1, true, func(ctx context.Context, b *DeviceBatch) (*DeviceBatch, error) {
		if b.staged.slot.finished.Load() {
			return nil, fmt.Errorf("verify %q: the batch starting at %s has given its staging slot back already (verify before mark-preemptible)", name, firstKey(b.Keys))
		}
		if int64(cap(back)) < b.Bytes {
			back = make([]byte, b.Bytes)
		}
		back = back[:b.Bytes]
		if err := b.CopyToHost(ctx, back); err != nil {
			return nil, fmt.Errorf("verify %q: the batch starting at %s: %w", name, firstKey(b.Keys), err)
		}
		want := b.staged.Bytes()
		for i := range want {
			if back[i] != want[i] {
				return nil, fmt.Errorf("verify %q: the batch starting at %s differs on the device from its staging slot at byte %d of %d (device %#x, staged %#x)",
					name, firstKey(b.Keys), i, len(want), back[i], want[i])
			}
		}
		return b, nil
	})
}

func firstKey(keys []string) string {
	if len(keys) == 0 {
		return "(no key)"
	}
	return keys[0]
}

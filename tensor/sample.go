package tensor

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/psiflow/psiflow/stage"
)

// maxRetained is the largest buffer a pooled Sample keeps when released:
// one huge image must not pin its memory in the pool for ever.
const maxRetained = 32 << 20

// Sample is one tensor with its key and label (a decoded, transformed image,
// for example). A Sample from a [SamplePool] goes back to it when the graph
// releases it (it implements stage.Releaser and stage.Sized); one made by
// hand is released by doing nothing.
type Sample struct {
	// Key names the sample (a file path, a shard member).
	Key string
	// Label is the sample's class (an ImageFolder class index), -1 for none.
	Label  int64
	Tensor Tensor
	// Normalize, when not nil, makes a uint8 CHW sample stand for float32
	// values: byte v of channel c is Normalize[c][v] (torchvision's ToTensor
	// and Normalize, as a table). Collate writes the float32 batch from the
	// bytes as it copies them into the batch, so the float32 image is never
	// made per sample: a quarter of the bytes in flight between the decode
	// stage and collate, and one pass over the float32 bytes fewer. Any other
	// consumer of the sample reads uint8.
	Normalize [][256]float32
	pool      *SamplePool
}

// Release returns the sample's buffers to its pool. Call it once.
func (s *Sample) Release() {
	if p := s.pool; p != nil {
		s.pool = nil
		s.Key = ""
		s.Normalize = nil
		if cap(s.Tensor.U8) > maxRetained || cap(s.Tensor.F32)*4 > maxRetained {
			s.Tensor.U8, s.Tensor.F32 = nil, nil
		}
		p.p.Put(s)
	}
}

// Size is the tensor's size in bytes.
func (s *Sample) Size() int64 { return s.Tensor.NBytes() }

// SamplePool hands out Samples whose buffers are reused once released. The
// zero value is ready to use; it is safe for concurrent use.
type SamplePool struct{ p sync.Pool }

// Get returns a Sample that goes back to p on Release. Its buffers hold the
// values of an earlier sample: set every field.
func (p *SamplePool) Get() *Sample {
	s, _ := p.p.Get().(*Sample)
	if s == nil {
		s = &Sample{}
	}
	s.pool = p
	return s
}

// Batch is a collated batch: one tensor of shape [n, sample shape...], with
// the samples' keys and labels. One from [Collate] comes from a pool, to
// which the graph returns it when the batch's life ends.
type Batch struct {
	Keys   []string
	Labels []int64
	Tensor Tensor
	pool   *sync.Pool
	// lent is the release of the destination memory the tensor lies in
	// ([CollateInto]); nil for the pool's own buffers.
	lent func()
	own  Tensor // the pooled buffers, kept while the tensor is lent memory
}

// Release returns the batch's buffers to its pool, and lent destination
// memory to its lender. Call it once.
func (b *Batch) Release() {
	if b.lent != nil {
		b.lent()
		b.lent = nil
		b.Tensor.U8, b.Tensor.F32 = b.own.U8, b.own.F32
	}
	if p := b.pool; p != nil {
		b.pool = nil
		clear(b.Keys)
		p.Put(b)
	}
}

// Destination lends the memory batches are collated into, so that a batch
// is written once, where its consumer reads it (the PyTorch sink's
// shared-memory slots), instead of into a buffer of its own and then copied.
type Destination interface {
	// Lend returns n bytes for the next batch, waiting (until ctx ends)
	// while none is free, and the function that gives them back. The
	// memory must be aligned for float32. release is called once, when
	// the batch is released: after the consumer took the batch (which it
	// recognises by its memory) or without it (a batch dropped on the way).
	Lend(ctx context.Context, n int64) (buf []byte, release func(), err error)
}

// Truncate keeps the first n samples of the batch (n between 0 and Len): the
// keys, the labels and the tensor's outer dimension and elements.
func (b *Batch) Truncate(n int) {
	if n < 0 || n >= len(b.Keys) {
		return
	}
	b.Keys = b.Keys[:n]
	if len(b.Labels) > n {
		b.Labels = b.Labels[:n]
	}
	if len(b.Tensor.Shape) > 0 && b.Tensor.Shape[0] > 0 {
		per := b.Tensor.Len() / b.Tensor.Shape[0]
		b.Tensor.Shape[0] = n
		if b.Tensor.DType == Float32 {
			b.Tensor.F32 = b.Tensor.F32[:n*per]
		} else {
			b.Tensor.U8 = b.Tensor.U8[:n*per]
		}
	}
}

// Len is the number of samples in the batch.
func (b *Batch) Len() int { return len(b.Keys) }

// Size is the batch tensor's size in bytes.
func (b *Batch) Size() int64 { return b.Tensor.NBytes() }

// Collate returns a stage that copies each slice of samples (from
// stage.Batch) into one contiguous [*Batch]; the graph releases the samples
// once they are copied, and the batch when its life ends. All samples of a
// batch must have the same shape and type, else the error names the first
// sample that differs.
func Collate(name string) stage.Stage[[]*Sample, *Batch] {
	pool := &sync.Pool{}
	pool.New = func() any { return &Batch{} }
	return stage.Apply(name, 1, true, func(ctx context.Context, ss []*Sample) (*Batch, error) {
		b := pool.Get().(*Batch)
		b.pool = pool
		if err := collate(b, ss); err != nil {
			b.Release()
			return nil, fmt.Errorf("collate %q: %w", name, err)
		}
		return b, nil
	})
}

// CollateInto is [Collate] writing each batch straight into memory that
// dest returns lends (its consumer's), when dest returns one: the batch's
// tensor aliases that memory until the batch is released, and no copy of
// it is made on the way. dest is asked for every batch, so a destination
// that exists only once the graph runs (a sink opened after this stage was
// built) can be given; when it returns nil the batch goes into the stage's
// pooled buffers, as with Collate.
func CollateInto(name string, dest func() Destination) stage.Stage[[]*Sample, *Batch] {
	pool := &sync.Pool{}
	pool.New = func() any { return &Batch{} }
	return stage.Apply(name, 1, true, func(ctx context.Context, ss []*Sample) (*Batch, error) {
		b := pool.Get().(*Batch)
		b.pool = pool
		var d Destination
		if dest != nil {
			d = dest()
		}
		if err := collateTo(ctx, b, ss, d); err != nil {
			b.Release()
			return nil, fmt.Errorf("collate %q: %w", name, err)
		}
		return b, nil
	})
}

// checkNormalize reports whether s, a sample with a normalisation table,
// is what the table applies to: uint8 CHW with one table per channel.
func checkNormalize(s *Sample) error {
	t := &s.Tensor
	if t.DType != Uint8 || len(t.Shape) != 3 || t.Shape[0] != len(s.Normalize) {
		return fmt.Errorf("sample %s: a normalisation table of %d channels needs a uint8 [%d, H, W] tensor, not %v %v", s.Key, len(s.Normalize), len(s.Normalize), t.DType, t.Shape)
	}
	return nil
}

// normalizeInto writes the float32 values of CHW bytes src through the
// per-channel tables lut into dst (both of one sample's length).
func normalizeInto(dst []float32, src []uint8, lut [][256]float32) {
	hw := len(src) / len(lut)
	for c := range lut {
		l := &lut[c]
		d, s := dst[c*hw:(c+1)*hw], src[c*hw:(c+1)*hw]
		for j, v := range s {
			d[j] = l[v]
		}
	}
}

// keyOf names the first sample of ss whose Normalize is set (norm) or not.
func keyOf(ss []*Sample, norm bool) string {
	for _, s := range ss {
		if (s.Normalize != nil) == norm {
			return s.Key
		}
	}
	return "?"
}

func collate(b *Batch, ss []*Sample) error { return collateTo(context.Background(), b, ss, nil) }

func collateTo(ctx context.Context, b *Batch, ss []*Sample, dest Destination) error {
	b.Keys, b.Labels = b.Keys[:0], b.Labels[:0]
	if len(ss) == 0 {
		b.Tensor.SetShape(0)
		return nil
	}
	first := &ss[0].Tensor
	per := first.Len()
	b.Tensor.Shape = append(append(b.Tensor.Shape[:0], len(ss)), first.Shape...)
	// out is the batch's type: float32 for uint8 samples that stand for
	// float32 values (Sample.Normalize), else the samples'.
	out, norm := first.DType, ss[0].Normalize != nil
	if norm {
		if err := checkNormalize(ss[0]); err != nil {
			return err
		}
		out = Float32
	}
	var u8 []uint8
	var f32 []float32
	switch {
	case dest != nil:
		n := per * len(ss)
		size := int64(n)
		if out == Float32 {
			size *= 4
		}
		buf, release, err := dest.Lend(ctx, size)
		if err != nil {
			return err
		}
		if int64(len(buf)) < size {
			release()
			return fmt.Errorf("destination lent %d bytes for a batch of %d", len(buf), size)
		}
		b.own = Tensor{U8: b.Tensor.U8, F32: b.Tensor.F32}
		b.lent = release
		b.Tensor.DType = out
		if out == Float32 {
			if uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%4 != 0 {
				return fmt.Errorf("destination memory not aligned for float32")
			}
			f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(buf))), n)
			b.Tensor.F32, b.Tensor.U8 = f32, nil
		} else {
			u8 = buf[:n:n]
			b.Tensor.U8, b.Tensor.F32 = u8, nil
		}
	case out == Float32:
		f32 = b.Tensor.ReuseF32(per * len(ss))
	default:
		u8 = b.Tensor.ReuseU8(per * len(ss))
	}
	for i, s := range ss {
		t := &s.Tensor
		if t.DType != first.DType || !slices.Equal(t.Shape, first.Shape) {
			return fmt.Errorf("sample %s has %v %v, the batch %v %v", s.Key, t.DType, t.Shape, first.DType, first.Shape)
		}
		if (s.Normalize != nil) != norm {
			return fmt.Errorf("sample %s is normalised in collate (Sample.Normalize) and %s is not: one batch takes one kind", keyOf(ss, norm), keyOf(ss, !norm))
		}
		switch {
		case norm:
			if len(s.Normalize) != len(ss[0].Normalize) {
				return fmt.Errorf("sample %s: a normalisation table of %d channels, the batch's %d", s.Key, len(s.Normalize), len(ss[0].Normalize))
			}
			normalizeInto(f32[i*per:(i+1)*per], t.U8[:per], s.Normalize)
		case f32 != nil:
			copy(f32[i*per:(i+1)*per], t.F32)
		default:
			copy(u8[i*per:(i+1)*per], t.U8)
		}
		b.Keys = append(b.Keys, s.Key)
		b.Labels = append(b.Labels, s.Label)
	}
	return nil
}

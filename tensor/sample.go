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
	pool   *SamplePool
}

// Release returns the sample's buffers to its pool. Call it once.
func (s *Sample) Release() {
	if p := s.pool; p != nil {
		s.pool = nil
		s.Key = ""
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
	var u8 []uint8
	var f32 []float32
	switch {
	case dest != nil:
		n := per * len(ss)
		size := int64(n)
		if first.DType == Float32 {
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
		b.Tensor.DType = first.DType
		if first.DType == Float32 {
			if uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%4 != 0 {
				return fmt.Errorf("destination memory not aligned for float32")
			}
			f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(buf))), n)
			b.Tensor.F32, b.Tensor.U8 = f32, nil
		} else {
			u8 = buf[:n:n]
			b.Tensor.U8, b.Tensor.F32 = u8, nil
		}
	case first.DType == Float32:
		f32 = b.Tensor.ReuseF32(per * len(ss))
	default:
		u8 = b.Tensor.ReuseU8(per * len(ss))
	}
	for i, s := range ss {
		t := &s.Tensor
		if t.DType != first.DType || !slices.Equal(t.Shape, first.Shape) {
			return fmt.Errorf("sample %s has %v %v, the batch %v %v", s.Key, t.DType, t.Shape, first.DType, first.Shape)
		}
		if f32 != nil {
			copy(f32[i*per:(i+1)*per], t.F32)
		} else {
			copy(u8[i*per:(i+1)*per], t.U8)
		}
		b.Keys = append(b.Keys, s.Key)
		b.Labels = append(b.Labels, s.Label)
	}
	return nil
}

package tensor

import (
	"context"
	"fmt"
	"slices"
	"sync"

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
}

// Release returns the batch's buffers to its pool. Call it once.
func (b *Batch) Release() {
	if p := b.pool; p != nil {
		b.pool = nil
		clear(b.Keys)
		p.Put(b)
	}
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

func collate(b *Batch, ss []*Sample) error {
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
	if first.DType == Float32 {
		f32 = b.Tensor.ReuseF32(per * len(ss))
	} else {
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

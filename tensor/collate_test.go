package tensor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// ring is a Destination of fixed slots that records what it lends.
type ring struct {
	mem      []byte
	slot     int
	free     []int
	lends    int
	releases int
	fail     error
}

func newRing(slots, slotBytes int) *ring {
	r := &ring{mem: make([]byte, slots*slotBytes), slot: slotBytes}
	for i := range slots {
		r.free = append(r.free, i)
	}
	return r
}

func (r *ring) Lend(_ context.Context, n int64) ([]byte, func(), error) {
	if r.fail != nil {
		return nil, nil, r.fail
	}
	if n > int64(r.slot) || len(r.free) == 0 {
		return nil, nil, fmt.Errorf("no slot for %d bytes", n)
	}
	s := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	r.lends++
	return r.mem[s*r.slot : (s+1)*r.slot], func() { r.releases++; r.free = append(r.free, s) }, nil
}

func samples(n int, dt DType, per int) []*Sample {
	ss := make([]*Sample, n)
	for i := range ss {
		s := &Sample{Key: fmt.Sprint("s", i), Label: int64(i)}
		s.Tensor.Shape = []int{per}
		if dt == Float32 {
			f := s.Tensor.ReuseF32(per)
			for j := range f {
				f[j] = float32(i*1000 + j)
			}
		} else {
			u := s.Tensor.ReuseU8(per)
			for j := range u {
				u[j] = uint8(i*31 + j)
			}
		}
		ss[i] = s
	}
	return ss
}

// TestCollateInto: the batch's tensor is the destination's memory (no
// buffer of its own, no copy afterwards), holds every sample in order, and
// the memory goes back to the destination exactly once when the batch is
// released, also when collation fails after the memory was lent; a nil
// destination collates into the pooled buffers.
func TestCollateInto(t *testing.T) {
	for _, dt := range []DType{Uint8, Float32} {
		t.Run(dt.String(), func(t *testing.T) {
			r := newRing(2, 4096)
			ss := samples(4, dt, 50)
			var b Batch
			if err := collateTo(context.Background(), &b, ss, r); err != nil {
				t.Fatal(err)
			}
			raw := b.Tensor.Bytes()
			if r.lends != 1 || unsafe.SliceData(raw) != unsafe.SliceData(r.mem[4096:]) {
				t.Fatalf("lends %d, batch memory %p, want the lent slot %p", r.lends, unsafe.SliceData(raw), unsafe.SliceData(r.mem[4096:]))
			}
			if b.Tensor.Shape[0] != 4 || b.Tensor.Len() != 200 || b.Len() != 4 || b.Labels[3] != 3 {
				t.Fatalf("shape %v, %d keys, labels %v", b.Tensor.Shape, b.Len(), b.Labels)
			}
			for i, s := range ss {
				want := s.Tensor.Bytes()
				if got := raw[i*len(want) : (i+1)*len(want)]; string(got) != string(want) {
					t.Fatalf("sample %d differs in the lent memory", i)
				}
			}
			b.Release()
			if r.releases != 1 || len(r.free) != 2 {
				t.Fatalf("releases %d, free %d", r.releases, len(r.free))
			}
			b.Release() // a second Release of a batch not from a pool returns nothing twice
			if r.releases != 1 {
				t.Fatalf("released twice")
			}
			// a sample of another shape after the memory was lent
			bad := samples(3, dt, 50)
			bad[2].Tensor.Shape = []int{49}
			if err := collateTo(context.Background(), &b, bad, r); err == nil || !strings.Contains(err.Error(), "sample s2") {
				t.Fatalf("mismatched sample: %v", err)
			}
			b.Release()
			if r.releases != 2 || len(r.free) != 2 {
				t.Fatalf("after a failed collation: releases %d, free %d", r.releases, len(r.free))
			}
			// no destination: the pooled buffers
			if err := collateTo(context.Background(), &b, ss, nil); err != nil {
				t.Fatal(err)
			}
			if unsafe.SliceData(b.Tensor.Bytes()) == unsafe.SliceData(r.mem) || unsafe.SliceData(b.Tensor.Bytes()) == unsafe.SliceData(r.mem[4096:]) {
				t.Fatal("collated into the ring without a destination")
			}
		})
	}
	r := newRing(1, 4096)
	r.fail = errors.New("consumer gone")
	var b Batch
	if err := collateTo(context.Background(), &b, samples(2, Uint8, 8), r); err == nil || !strings.Contains(err.Error(), "consumer gone") {
		t.Fatalf("lend failure: %v", err)
	}
}

// TestCollateIntoAllocs: collating into lent memory allocates nothing in
// steady state (no batch buffer, no copy).
func TestCollateIntoAllocs(t *testing.T) {
	r := newRing(1, 1<<20)
	ss := samples(64, Uint8, 3*32*32)
	var b Batch
	run := func() {
		if err := collateTo(context.Background(), &b, ss, r); err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	run()
	if n := testing.AllocsPerRun(50, run); n > 1 { // the release closure of the test's ring
		t.Errorf("%v allocations per batch, want ≤ 1", n)
	}
}

// BenchmarkCollate: a batch of 64 samples of 3×224×224 uint8 collated into
// the stage's own buffer and then copied into the consumer's memory (what
// the PyTorch sink did), against collated straight into that memory.
func BenchmarkCollate(b *testing.B) {
	ss := samples(64, Uint8, 3*224*224)
	size := 64 * 3 * 224 * 224
	for _, into := range []bool{false, true} {
		name := "then-copy"
		if into {
			name = "into-destination"
		}
		b.Run(name, func(b *testing.B) {
			r := newRing(1, size)
			var bt Batch
			b.SetBytes(int64(size))
			for b.Loop() {
				if into {
					if err := collateTo(context.Background(), &bt, ss, r); err != nil {
						b.Fatal(err)
					}
				} else {
					if err := collateTo(context.Background(), &bt, ss, nil); err != nil {
						b.Fatal(err)
					}
					buf, release, _ := r.Lend(context.Background(), int64(size))
					copy(buf, bt.Tensor.Bytes())
					release()
				}
				bt.Release()
			}
		})
	}
}

// TestCollateNormalize: uint8 samples with a normalisation table collate
// into a float32 batch of the table's values, into lent memory (sized for
// float32) and into the pooled buffers alike; a batch mixing them with plain
// samples, or a table that does not fit the tensor, is an error naming the
// sample.
func TestCollateNormalize(t *testing.T) {
	lut := make([][256]float32, 3)
	for c := range lut {
		for v := range 256 {
			lut[c][v] = float32(c*1000+v) / 7
		}
	}
	const h, w = 4, 5
	make3 := func(n int) []*Sample {
		ss := samples(n, Uint8, 3*h*w)
		for _, s := range ss {
			s.Tensor.Shape, s.Normalize = []int{3, h, w}, lut
		}
		return ss
	}
	for _, r := range []*ring{newRing(2, 4*4*3*h*w), nil} {
		ss := make3(4)
		var b Batch
		var dest Destination
		if r != nil {
			dest = r
		}
		if err := collateTo(context.Background(), &b, ss, dest); err != nil {
			t.Fatal(err)
		}
		if b.Tensor.DType != Float32 || !slices.Equal(b.Tensor.Shape, []int{4, 3, h, w}) || len(b.Tensor.F32) != 4*3*h*w {
			t.Fatalf("batch %v %v, %d float32 values", b.Tensor.DType, b.Tensor.Shape, len(b.Tensor.F32))
		}
		for i, s := range ss {
			for j, v := range s.Tensor.U8 {
				c := j / (h * w)
				if got := b.Tensor.F32[i*3*h*w+j]; got != lut[c][v] {
					t.Fatalf("sample %d value %d (channel %d, byte %d): %v, want %v", i, j, c, v, got, lut[c][v])
				}
			}
		}
		if r != nil && unsafe.Pointer(unsafe.SliceData(b.Tensor.F32)) != unsafe.Pointer(unsafe.SliceData(r.mem[r.slot:])) {
			t.Fatal("the float32 batch is not in the lent slot")
		}
		b.Release()
	}
	mixed := make3(3)
	mixed[1].Normalize = nil
	var b Batch
	if err := collate(&b, mixed); err == nil || !strings.Contains(err.Error(), "s1") {
		t.Fatalf("mixed batch: %v", err)
	}
	bad := make3(2)
	bad[0].Normalize = lut[:2]
	if err := collate(&b, bad); err == nil || !strings.Contains(err.Error(), "s0") || !strings.Contains(err.Error(), "2 channels") {
		t.Fatalf("a 2-channel table on 3 channels: %v", err)
	}
}

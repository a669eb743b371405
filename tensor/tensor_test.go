package tensor

import (
	"context"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/psiflow/psiflow/flow"
	"github.com/psiflow/psiflow/stage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTensorBytes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		t      Tensor
		nbytes int64
		first  byte
	}{
		{"uint8", Tensor{DType: Uint8, Shape: []int{2, 2}, U8: []uint8{7, 2, 3, 4}}, 4, 7},
		{"float32", Tensor{DType: Float32, Shape: []int{2}, F32: []float32{1, 2}}, 8, 0}, // 1.0 is 0x3f800000: low byte 0
		{"empty float32", Tensor{DType: Float32, Shape: []int{0}}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.t.Bytes()
			if int64(len(b)) != tc.nbytes || tc.t.NBytes() != tc.nbytes {
				t.Fatalf("Bytes %d, NBytes %d, want %d", len(b), tc.t.NBytes(), tc.nbytes)
			}
			if len(b) > 0 && b[0] != tc.first {
				t.Fatalf("first byte %d, want %d", b[0], tc.first)
			}
		})
	}
	f := Tensor{DType: Float32, F32: []float32{1}}
	f.Bytes()[3] = 0x40 // 0x40800000 is 4.0: the bytes alias the elements
	if f.F32[0] != 4 {
		t.Fatalf("Bytes does not alias F32: %v", f.F32[0])
	}
}

func TestReuseKeepsMemory(t *testing.T) {
	var x Tensor
	a := x.ReuseU8(16)
	b := x.ReuseU8(8)
	if &a[0] != &b[0] || len(b) != 8 || x.DType != Uint8 {
		t.Fatal("ReuseU8 did not reuse a large enough buffer")
	}
	x.SetShape(2, 4)
	if x.Len() != 8 {
		t.Fatalf("Len %d, want 8", x.Len())
	}
	x.ReuseF32(3)
	if x.DType != Float32 || len(x.F32) != 3 {
		t.Fatalf("ReuseF32: %v %d", x.DType, len(x.F32))
	}
}

func TestNames(t *testing.T) {
	if Uint8.String() != "uint8" || Float32.String() != "float32" || CHW.String() != "CHW" || HWC.String() != "HWC" || Layout(9).String() != "Layout(9)" {
		t.Fatal("names changed: the Python consumer and the Arrow metadata read them")
	}
	if Uint8.Size() != 1 || Float32.Size() != 4 {
		t.Fatal("element sizes")
	}
}

func TestCollateShapeMismatch(t *testing.T) {
	a, b := &Sample{Key: "a"}, &Sample{Key: "b"}
	a.Tensor.Shape, a.Tensor.U8 = []int{2}, []uint8{1, 2}
	b.Tensor.Shape, b.Tensor.U8 = []int{3}, []uint8{1, 2, 3}
	var bt Batch
	if err := collate(&bt, []*Sample{a, b}); err == nil || !strings.Contains(err.Error(), "sample b") {
		t.Fatalf("collate = %v, want an error naming sample b", err)
	}
}

// Collate in a graph: pooled samples in, one contiguous batch out with keys
// and labels in order; every sample and batch goes back to its pool.
func TestCollateInGraph(t *testing.T) {
	pool := &SamplePool{}
	var in []*Sample
	for i := range 5 {
		s := pool.Get()
		s.Key, s.Label = string(rune('a'+i)), int64(i)
		copy(s.Tensor.ReuseU8(3), []uint8{byte(i), byte(i), byte(i)})
		s.Tensor.SetShape(3)
		in = append(in, s)
	}
	g := flow.New("collate")
	batches := flow.Via(flow.Via(flow.FromSlice(g, "samples", in), stage.Batch[*Sample]("batch", 2, 0)), Collate("collate"))
	var keys []string
	var labels []int64
	var shapes [][]int
	var data []uint8
	flow.Sink(batches, "sink", func(_ context.Context, b *Batch) error {
		keys, labels = append(keys, b.Keys...), append(labels, b.Labels...)
		shapes = append(shapes, slices.Clone(b.Tensor.Shape))
		data = append(data, b.Tensor.Bytes()...)
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, "") != "abcde" || !slices.Equal(labels, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("keys %v labels %v", keys, labels)
	}
	if !slices.EqualFunc(shapes, [][]int{{2, 3}, {2, 3}, {1, 3}}, slices.Equal) {
		t.Fatalf("shapes %v, want [2 3] [2 3] [1 3]", shapes)
	}
	if !slices.Equal(data, []uint8{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}) {
		t.Fatalf("data %v", data)
	}
	for _, s := range in {
		if s.pool != nil {
			t.Fatalf("sample %s was not released", s.Key)
		}
	}
}
